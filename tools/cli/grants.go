package cli

import (
	"context"

	"bighive/client"
)

// grantCommands are `bighive grant`, `bighive revoke` and `bighive grants`
// (admin only on a cluster started with --auth-tokens).
func grantCommands() []Command {
	return []Command{
		{Name: "grant", Args: "PRINCIPAL ROLE [TABLE]", Summary: "give PRINCIPAL the role read, write or admin on TABLE (default: every table)",
			Example: "grant alice write orders --token $ADMIN_TOKEN\ngrant ops admin", Run: runGrant},
		{Name: "revoke", Args: "PRINCIPAL ROLE [TABLE]", Summary: "take a grant back; tservers deny it within one heartbeat interval",
			Example: "revoke alice write orders", Run: runRevoke},
		{Name: "grants", Summary: "list every grant", Example: "grants\ngrants --json", Run: runGrants},
	}
}

func grantArgs(pos []string) client.Grant {
	g := client.Grant{Principal: pos[0], Role: pos[1]}
	if len(pos) > 2 {
		g.Table = pos[2]
	}
	return g
}

func tableOrAll(t string) string {
	if t == "" {
		return "every table"
	}
	return "table " + t
}

func runGrant(ctx context.Context, env *Env, args []string) error {
	return changeGrant(ctx, env, args, "granted", (*client.Client).GrantRole)
}

func runRevoke(ctx context.Context, env *Env, args []string) error {
	return changeGrant(ctx, env, args, "revoked", (*client.Client).RevokeRole)
}

// changeGrant runs grant or revoke (change) on PRINCIPAL ROLE [TABLE].
func changeGrant(ctx context.Context, env *Env, args []string, done string, change func(*client.Client, context.Context, client.Grant) error) error {
	ctx, closeFn, c, pos, err := env.session(ctx, args, 2, 3, nil)
	if err != nil {
		return err
	}
	defer closeFn()
	g := grantArgs(pos)
	if err := change(c, ctx, g); err != nil {
		return err
	}
	return env.result(map[string]any{done: g.Role, "principal": g.Principal, "table": g.Table},
		"%s %s %s on %s", done, g.Principal, g.Role, tableOrAll(g.Table))
}

func runGrants(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, _, err := env.session(ctx, args, 0, 0, nil)
	if err != nil {
		return err
	}
	defer done()
	gs, _, err := c.Grants(ctx)
	if err != nil {
		return err
	}
	if env.JSON {
		for _, g := range gs {
			if err := env.object(map[string]any{"principal": g.Principal, "role": g.Role, "table": g.Table}); err != nil {
				return err
			}
		}
		return nil
	}
	rows := make([][]string, 0, len(gs))
	for _, g := range gs {
		t := g.Table
		if t == "" {
			t = "*"
		}
		rows = append(rows, []string{g.Principal, g.Role, t})
	}
	return env.Table([]string{"PRINCIPAL", "ROLE", "TABLE"}, rows)
}
