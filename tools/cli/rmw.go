package cli

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"

	"bighive/client"
)

// runIncr is `incr TABLE ROW fam:col [DELTA]`: one ReadModifyWrite
// increment. It is not retried after it may have reached a tserver.
func runIncr(ctx context.Context, env *Env, args []string) error {
	// A negative DELTA ("-3") would parse as a flag: take it out first.
	var neg []string
	rest := args[:0:0]
	for _, a := range args {
		if _, err := strconv.ParseInt(a, 10, 64); err == nil && strings.HasPrefix(a, "-") && neg == nil {
			neg = []string{a}
			continue
		}
		rest = append(rest, a)
	}
	ctx, done, c, pos, err := env.session(ctx, rest, 3-len(neg), 4-len(neg), nil)
	if err != nil {
		return err
	}
	defer done()
	pos = append(pos, neg...)
	delta := int64(1)
	if len(pos) == 4 {
		if delta, err = strconv.ParseInt(pos[3], 10, 64); err != nil {
			return Usagef("delta %q is not a 64-bit integer", pos[3])
		}
	}
	m := client.NewReadModifyWrite()
	fam, qual, ok := strings.Cut(pos[2], ":")
	if !ok {
		return Usagef("column %q is not FAMILY:QUALIFIER", pos[2])
	}
	m.Increment(fam, qual, delta)
	row, err := applyRMW(ctx, c, pos[0], pos[1], m)
	if err != nil {
		return err
	}
	v, _ := row.Value(fam, qual)
	n := int64(binary.BigEndian.Uint64(v))
	return env.result(map[string]any{"row": pos[1], "column": pos[2], "value": n, "timestamp": row.Cells[0].Timestamp},
		"%d", n)
}

// runAppend is `append TABLE ROW fam:col VALUE`.
func runAppend(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 4, 4, nil)
	if err != nil {
		return err
	}
	defer done()
	fam, qual, ok := strings.Cut(pos[2], ":")
	if !ok {
		return Usagef("column %q is not FAMILY:QUALIFIER", pos[2])
	}
	m := client.NewReadModifyWrite()
	m.AppendValue(fam, qual, []byte(pos[3]))
	row, err := applyRMW(ctx, c, pos[0], pos[1], m)
	if err != nil {
		return err
	}
	if env.JSON {
		return env.object(rowObject(row))
	}
	return env.Table(cellHeader, cellRows(nil, row))
}

func applyRMW(ctx context.Context, c *client.Client, table, row string, m *client.ReadModifyWrite) (client.Row, error) {
	tbl, err := openTable(ctx, c, table)
	if err != nil {
		return client.Row{}, err
	}
	return tbl.ApplyReadModifyWrite(ctx, row, m)
}
