package cli

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// cbtCommands are the commands Google's cbt has under other names than
// Bighive's, with the same meaning: a cbt user's habits work here. (The
// cbt names Bighive already has, such as read, lookup, count, set,
// createfamily, deletefamily, setgcpolicy, deleteallrows and
// samplerowkeys, are its own commands.)
func cbtCommands() []Command {
	return []Command{
		{Name: "ls", Args: "[TABLE]", Summary: "cbt's ls: the table names, one per line, or TABLE's families and their GC policies", Example: "ls\nls t", Run: runLs},
		{Name: "createtable", Args: "TABLE [families=CF[:maxversions=N][:maxage=DUR],...] [splits=K1,K2,...]", Summary: "cbt's createtable: create a table (as create, with cbt's KEY=VALUE arguments)", Example: "createtable t families=cf:maxversions=3,meta splits=user#5", Run: runCreateTable},
		{Name: "deletetable", Args: "TABLE", Summary: "cbt's deletetable: delete a table and its data (as drop)", Example: "deletetable t", Run: runDrop},
		{Name: "deleterow", Args: "TABLE ROW", Summary: "cbt's deleterow: delete a row (as delete TABLE ROW)", Example: "deleterow t user#1", Run: runDeleteRow},
		{Name: "setvaluetype", Args: "TABLE FAMILY TYPE", Summary: "cbt's setvaluetype: refused, as a family's value type is fixed at its creation (NotFound for a family the table lacks)", Example: "setvaluetype t cf stringutf8bytes", Run: runSetValueType},
		{Name: "deletecolumn", Args: "TABLE ROW FAMILY QUALIFIER", Summary: "cbt's deletecolumn: delete a column of a row (as delete TABLE ROW FAMILY:QUALIFIER)", Example: "deletecolumn t user#1 cf name", Run: runDeleteColumn},
	}
}

func runLs(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 0, 1, nil)
	if err != nil {
		return err
	}
	defer done()
	infos, err := c.DescribeTables(ctx)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		for _, t := range infos {
			if env.JSON {
				if err := env.object(map[string]any{"name": t.Name}); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintln(env.Stdout, t.Name)
		}
		return nil
	}
	for _, t := range infos {
		if t.Name != pos[0] {
			continue
		}
		var rows [][]string
		for _, f := range t.Families {
			policy := gcPolicyJSON(f.GCPolicy)
			if policy == "" {
				policy = strings.TrimPrefix(familyString(f), f.Name+":")
				if policy == f.Name {
					policy = "<never>"
				}
			}
			if env.JSON {
				if err := env.object(map[string]any{"family": f.Name, "gc_policy": policy}); err != nil {
					return err
				}
				continue
			}
			rows = append(rows, []string{f.Name, policy})
		}
		if env.JSON {
			return nil
		}
		return env.Table([]string{"FAMILY", "GC POLICY"}, rows)
	}
	return fmt.Errorf("table %q not found", pos[0])
}

// runCreateTable turns cbt's families=… and splits=… into create's flags.
func runCreateTable(ctx context.Context, env *Env, args []string) error {
	out := make([]string, 0, len(args))
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case ok && (k == "families" || k == "splits"):
			out = append(out, "--"+k+"="+v)
		case ok && !strings.HasPrefix(a, "-"):
			return fmt.Errorf("createtable: unknown argument %q (families=… and splits=… are known)", a)
		default:
			out = append(out, a)
		}
	}
	return runCreate(ctx, env, out)
}

func runDeleteRow(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 2, 2, nil)
	if err != nil {
		return err
	}
	defer done()
	return deleteCells(ctx, env, c, pos)
}

func runDeleteColumn(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 4, 4, nil)
	if err != nil {
		return err
	}
	defer done()
	return deleteCells(ctx, env, c, []string{pos[0], pos[1], pos[2] + ":" + pos[3]})
}

// runSetValueType is cbt's setvaluetype. Bighive fixes a family's value
// type at its creation (an aggregate family's, as Cloud Bigtable does, and
// a plain family has no other), so it refuses the change with
// InvalidArgument, after NotFound for a table or family that does not
// exist.
func runSetValueType(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 3, 3, nil)
	if err != nil {
		return err
	}
	defer done()
	infos, err := c.DescribeTables(ctx)
	if err != nil {
		return err
	}
	for _, t := range infos {
		if t.Name != pos[0] {
			continue
		}
		for _, f := range t.Families {
			if f.Name == pos[1] {
				return status.Errorf(codes.InvalidArgument, "column family %q of table %q: its value type is set at its creation and is immutable afterwards (asked for %q)", pos[1], pos[0], pos[2])
			}
		}
		return status.Errorf(codes.NotFound, "column family %q of table %q does not exist", pos[1], pos[0])
	}
	return status.Errorf(codes.NotFound, "table %q not found", pos[0])
}
