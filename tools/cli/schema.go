package cli

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc/status"

	"bighive/client"
)

// schemaCommands are the live schema changes and row-range drops.
func schemaCommands() []Command {
	return []Command{
		{Name: "createfamily", Args: "TABLE FAMILY [--compression none|snappy|zstd] [--type intsum|intmin|intmax]", Summary: "add a column family (writable as soon as this returns); --type makes it an aggregate family, fixed from then on", Example: "createfamily t cf2\ncreatefamily t blobs --compression zstd\ncreatefamily t counters --type intsum", Run: runCreateFamily},
		{Name: "deletefamily", Args: "TABLE FAMILY", Summary: "delete a column family: its data is unreadable at once", Example: "deletefamily t cf2", Run: runDeleteFamily},
		{Name: "setgcpolicy", Args: "TABLE FAMILY maxversions=N | maxage=DUR | never | (POLICY and|or POLICY ...)",
			Summary: "set a family's GC policy", Example: "setgcpolicy t cf maxversions=2\nsetgcpolicy t cf \"(maxage=7d and maxversions=2) or maxversions=10\"", Run: runSetGCPolicy},
		{Name: "deleteallrows", Args: "TABLE", Summary: "delete every row of a table", Example: "deleteallrows t", Run: runDeleteAllRows},
		{Name: "droprowrange", Args: "TABLE PREFIX", Summary: "delete every row whose key starts with PREFIX", Example: "droprowrange t user#42#", Run: runDropRowRange},
	}
}

func runCreateFamily(ctx context.Context, env *Env, args []string) error {
	var compression, typ string
	ctx, done, c, pos, err := env.session(ctx, args, 2, 2, func(fs flagSet) {
		fs.StringVar(&compression, "compression", "", "compression of the family's files: none, snappy (the default) or zstd")
		fs.StringVar(&typ, "type", "", "an aggregate family's type: intsum, intmin or intmax (default: a plain family of bytes)")
	})
	if err != nil {
		return err
	}
	defer done()
	comp, err := parseCompressionFlag(compression)
	if err != nil {
		return err
	}
	agg := client.NoAggregate
	if typ != "" {
		if agg, err = client.ParseAggregate(typ); err != nil {
			return Usagef("--type: %v", status.Convert(err).Message())
		}
	}
	if err := c.CreateColumnFamilyWithSpec(ctx, pos[0], client.FamilySpec{Name: pos[1], Compression: comp, Aggregate: agg}); err != nil {
		return err
	}
	return env.result(map[string]any{"table": pos[0], "created_family": pos[1]}, "created column family %s of table %s", pos[1], pos[0])
}

func runDeleteFamily(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 2, 2, nil)
	if err != nil {
		return err
	}
	defer done()
	if err := c.DeleteColumnFamily(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	return env.result(map[string]any{"table": pos[0], "deleted_family": pos[1]}, "deleted column family %s of table %s", pos[1], pos[0])
}

func runSetGCPolicy(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 3, -1, nil)
	if err != nil {
		return err
	}
	defer done()
	policy, err := ParseGCPolicy(strings.Join(pos[2:], " "))
	if err != nil {
		return err
	}
	if err := c.SetGCPolicy(ctx, pos[0], pos[1], policy); err != nil {
		return err
	}
	return env.result(map[string]any{"table": pos[0], "family": pos[1], "gc_policy": policy.String()},
		"set the GC policy of %s:%s to %s", pos[0], pos[1], policyString(policy))
}

func policyString(p client.GCPolicy) string {
	if s := p.String(); s != "" {
		return s
	}
	return "never (keep every cell)"
}

func runDeleteAllRows(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 1, 1, nil)
	if err != nil {
		return err
	}
	defer done()
	if err := c.DropAllRows(ctx, pos[0]); err != nil {
		return err
	}
	return env.result(map[string]any{"table": pos[0], "dropped": "all rows"}, "deleted every row of table %s", pos[0])
}

func runDropRowRange(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 2, 2, nil)
	if err != nil {
		return err
	}
	defer done()
	if err := c.DropRowRange(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	return env.result(map[string]any{"table": pos[0], "dropped_prefix": pos[1]}, "deleted the rows of table %s with prefix %q", pos[0], pos[1])
}

// ParseGCPolicy parses a GC policy as the CLI takes it: "maxversions=N",
// "maxage=DURATION" (Go durations plus a "d" day suffix), "never", and
// policies joined by "and" (&&) or "or" (||) in parentheses, nested to any
// depth. One level mixes "and" and "or" only with parentheses.
func ParseGCPolicy(s string) (client.GCPolicy, error) {
	p := &policyParser{toks: tokenizePolicy(s)}
	if len(p.toks) == 0 {
		return nil, Usagef("empty GC policy: give maxversions=N, maxage=DURATION, never, or (A and B), (A or B)")
	}
	pol, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, Usagef("GC policy %q: unexpected %q", s, p.toks[p.pos])
	}
	return pol, nil
}

func tokenizePolicy(s string) []string {
	s = strings.NewReplacer("(", " ( ", ")", " ) ", "&&", " and ", "||", " or ").Replace(s)
	return strings.Fields(s)
}

type policyParser struct {
	toks []string
	pos  int
}

func (p *policyParser) expr() (client.GCPolicy, error) {
	first, err := p.term()
	if err != nil {
		return nil, err
	}
	subs := []client.GCPolicy{first}
	op := ""
	for p.pos < len(p.toks) && p.toks[p.pos] != ")" {
		tok := strings.ToLower(p.toks[p.pos])
		if tok != "and" && tok != "or" {
			return nil, Usagef("GC policy: expected and/or, got %q", p.toks[p.pos])
		}
		if op != "" && tok != op {
			return nil, Usagef("GC policy: %q and %q mixed at one level; add parentheses", op, tok)
		}
		op = tok
		p.pos++
		next, err := p.term()
		if err != nil {
			return nil, err
		}
		subs = append(subs, next)
	}
	switch op {
	case "and":
		return client.IntersectionPolicy(subs...), nil
	case "or":
		return client.UnionPolicy(subs...), nil
	}
	return first, nil
}

func (p *policyParser) term() (client.GCPolicy, error) {
	if p.pos >= len(p.toks) {
		return nil, Usagef("GC policy ends early: a policy is missing")
	}
	tok := p.toks[p.pos]
	p.pos++
	if tok == "(" {
		pol, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.pos >= len(p.toks) || p.toks[p.pos] != ")" {
			return nil, Usagef("GC policy: missing )")
		}
		p.pos++
		return pol, nil
	}
	if strings.EqualFold(tok, "never") {
		return client.NoGcPolicy(), nil
	}
	k, v, ok := strings.Cut(tok, "=")
	if !ok {
		return nil, Usagef("GC policy: %q is not maxversions=N, maxage=DURATION or never", tok)
	}
	switch strings.ToLower(k) {
	case "maxversions", "versions":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, Usagef("GC policy: maxversions %q is not a count of at least 1", v)
		}
		return client.MaxVersionsPolicy(n), nil
	case "maxage", "ttl":
		d, err := parseAge(v)
		if err != nil || d <= 0 {
			return nil, Usagef("GC policy: maxage %q is not a positive duration (e.g. 36h, 7d)", v)
		}
		return client.MaxAgePolicy(d), nil
	}
	return nil, Usagef("GC policy: unknown rule %q (use maxversions=N, maxage=DURATION, never)", k)
}
