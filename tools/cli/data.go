package cli

import (
	"context"
	"strconv"
	"strings"
	"time"

	"bighive/client"
)

// dataCommands are cbt's names for reads and writes: lookup, set, count
// and samplerowkeys.
func dataCommands() []Command {
	return []Command{
		{Name: "lookup", Args: "TABLE ROW [--families F1,F2] [--columns F:Q,...] [--versions N] [--keys-only]", Summary: "read one row (the same as get)",
			Example: "lookup t user#1\nlookup t user#1 --columns cf:name,cf:email --versions 1", Run: runGet},
		{Name: "set", Args: "TABLE ROW FAMILY:QUALIFIER=VALUE [FAMILY:QUALIFIER=VALUE ...] [--timestamp MICROS]", Summary: "write several cells of one row in one atomic mutation",
			Example: "set t user#1 cf:name=alice cf:email=alice@example.com\nset t user#1 cf:name=bob --timestamp 1700000000000000", Run: runSet},
		{Name: "addtocell", Args: "TABLE ROW FAMILY:QUALIFIER=INT[@MICROS] [FAMILY:QUALIFIER=INT[@MICROS] ...]", Summary: "cbt's addtocell: add integers to cells of aggregate families in one atomic mutation (the timestamp defaults to the client's clock, in the table's granularity)",
			Example: "addtocell t user#1 counters:visits=1@0\naddtocell t user#1 counters:visits=5@0 counters:errors=-1@0", Run: runAddToCell},
		{Name: "count", Args: "TABLE [--prefix P] [--start ROW] [--end ROW]", Summary: "count the rows (a key-only scan: one stripped cell per row)",
			Example: "count t\ncount t --prefix user#\ncount t --start a --end m", Run: runCount},
		{Name: "samplerowkeys", Args: "TABLE", Summary: "row keys splitting the table into pieces of about equal size, with the bytes before each (the last is the end)",
			Example: "samplerowkeys t\nsamplerowkeys t --json", Run: runSampleRowKeys},
	}
}

// runSet is `set TABLE ROW fam:col=val ...`: every cell in one mutation,
// all with the same timestamp.
func runSet(ctx context.Context, env *Env, args []string) error {
	ts := int64(-2)
	ctx, done, c, pos, err := env.session(ctx, args, 3, -1, func(fs flagSet) {
		fs.Int64Var(&ts, "timestamp", ts, "the cells' timestamp in microseconds (default: the client's clock; -1: the server's)")
	})
	if err != nil {
		return err
	}
	defer done()
	if ts < -2 {
		return Usagef("--timestamp %d is negative", ts)
	}
	tbl, err := openTable(ctx, c, pos[0])
	if err != nil {
		return err
	}
	if ts == -2 {
		ts = time.Now().UnixMicro()
		if tbl.Granularity() == client.GranularityMillis {
			ts -= ts % 1000 // as Put: the table refuses a finer one
		}
	}
	m := client.NewMutation()
	var cols []string
	for _, a := range pos[2:] {
		col, val, ok := strings.Cut(a, "=")
		fam, qual, okc := strings.Cut(col, ":")
		if !ok || !okc || fam == "" {
			return Usagef("%q is not FAMILY:QUALIFIER=VALUE", a)
		}
		m.Set(fam, qual, ts, []byte(val))
		cols = append(cols, col)
	}
	if err := tbl.Apply(ctx, pos[1], m); err != nil {
		return err
	}
	return env.result(map[string]any{"set": pos[1], "columns": cols}, "ok")
}

// runAddToCell adds integers to aggregate cells, with cbt's syntax: each
// argument FAMILY:QUALIFIER=INT[@MICROS].
func runAddToCell(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 3, -1, nil)
	if err != nil {
		return err
	}
	defer done()
	tbl, err := openTable(ctx, c, pos[0])
	if err != nil {
		return err
	}
	now := time.Now().UnixMicro()
	if tbl.Granularity() == client.GranularityMillis {
		now -= now % 1000
	}
	m := client.NewMutation()
	var cols []string
	for _, a := range pos[2:] {
		col, val, ok := strings.Cut(a, "=")
		fam, qual, okc := strings.Cut(col, ":")
		if !ok || !okc || fam == "" {
			return Usagef("%q is not FAMILY:QUALIFIER=INT[@MICROS]", a)
		}
		ts := now
		if v, t, ok := strings.Cut(val, "@"); ok {
			if ts, err = strconv.ParseInt(t, 10, 64); err != nil || ts < 0 {
				return Usagef("%q: timestamp %q is not a count of microseconds", a, t)
			}
			val = v
		}
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return Usagef("%q: %q is not an int64", a, val)
		}
		m.AddToCell(fam, qual, ts, n)
		cols = append(cols, col)
	}
	if err := tbl.Apply(ctx, pos[1], m); err != nil {
		return err
	}
	return env.result(map[string]any{"added": pos[1], "columns": cols}, "ok")
}

// runCount counts the rows of a range with a key-only scan: each row
// comes back as one cell without its value.
func runCount(ctx context.Context, env *Env, args []string) error {
	var start, end, prefix string
	ctx, done, c, pos, err := env.session(ctx, args, 1, 1, func(fs flagSet) {
		fs.StringVar(&start, "start", "", "first row (inclusive)")
		fs.StringVar(&end, "end", "", "last row (exclusive; empty: to the end)")
		fs.StringVar(&prefix, "prefix", "", "only rows whose key starts with this (instead of --start and --end)")
	})
	if err != nil {
		return err
	}
	defer done()
	if prefix != "" {
		if start != "" || end != "" {
			return Usagef("--prefix cannot be combined with --start or --end")
		}
		start, end = prefix, prefixEnd(prefix)
	}
	tbl, err := openTable(ctx, c, pos[0])
	if err != nil {
		return err
	}
	var n int64
	err = tbl.Scan(ctx, start, end, func(client.Row) bool { n++; return true },
		client.RowFilter(client.ChainFilters(client.CellsPerRowLimitFilter(1), client.StripValueFilter())))
	if err != nil {
		return err
	}
	return env.result(map[string]any{"table": pos[0], "rows": n}, "%d", n)
}

// runSampleRowKeys prints the table's sample row keys with the estimated
// bytes before each; the last, the end of the table, shows as "(end)".
func runSampleRowKeys(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 1, 1, nil)
	if err != nil {
		return err
	}
	defer done()
	tbl, err := openTable(ctx, c, pos[0])
	if err != nil {
		return err
	}
	samples, err := tbl.SampleRowKeyOffsets(ctx, 0)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, s := range samples {
		if env.JSON {
			if err := env.object(map[string]any{"row_key": s.Key, "offset_bytes": s.OffsetBytes}); err != nil {
				return err
			}
			continue
		}
		key := show(s.Key)
		if s.Key == "" {
			key = "(end)"
		}
		rows = append(rows, []string{key, humanBytes(s.OffsetBytes)})
	}
	if env.JSON {
		return nil
	}
	return env.Table([]string{"ROW KEY", "OFFSET"}, rows)
}
