package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"bighive/client"
)

// session parses a command's flags, applies --timeout and dials.
func (e *Env) session(ctx context.Context, args []string, min, max int, setup func(fs flagSet)) (context.Context, context.CancelFunc, *client.Client, []string, error) {
	fs := e.FlagSet()
	if setup != nil {
		setup(fs)
	}
	pos, err := e.Parse(fs, args, min, max)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := e.Context(ctx)
	c, err := e.Client(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, nil, err
	}
	return ctx, func() { c.Close(); cancel() }, c, pos, nil
}

// parseFamilies parses "cf1,cf2:maxversions=3:maxage=24h,sum:intsum": an
// option without "=" is an aggregate type, as cbt's
// FAMILY:GCPOLICY:TYPE (intsum, intmin or intmax; "never" is the default
// policy and an empty option is skipped).
func parseFamilies(s string) ([]client.FamilySpec, error) {
	var out []client.FamilySpec
	for _, item := range splitList(s) {
		parts := strings.Split(item, ":")
		f := client.FamilySpec{Name: parts[0]}
		for _, opt := range parts[1:] {
			k, v, ok := strings.Cut(opt, "=")
			if !ok {
				switch opt = strings.ToLower(opt); {
				case opt == "" || opt == "never":
					continue
				case strings.HasPrefix(opt, "int"):
					a, err := client.ParseAggregate(opt)
					if err != nil {
						return nil, Usagef("family %q: %v", f.Name, status.Convert(err).Message())
					}
					f.Aggregate = a
					continue
				}
				return nil, Usagef("family %q: option %q is not key=value nor a type (intsum, intmin, intmax)", f.Name, opt)
			}
			switch strings.ToLower(k) {
			case "maxversions", "versions":
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return nil, Usagef("family %q: maxversions %q is not a count", f.Name, v)
				}
				f.MaxVersions = n
			case "maxage", "ttl":
				d, err := parseAge(v)
				if err != nil {
					return nil, Usagef("family %q: maxage %q: %v", f.Name, v, err)
				}
				f.MaxAge = d
			case "compression":
				c, err := client.ParseCompression(v)
				if err != nil {
					return nil, Usagef("family %q: compression %q: use none, snappy or zstd", f.Name, v)
				}
				f.Compression = c
			default:
				return nil, Usagef("family %q: unknown option %q (use maxversions=N, maxage=DURATION, compression=none|snappy|zstd)", f.Name, k)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// parseAge is time.ParseDuration plus a "d" (day) suffix.
func parseAge(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

func runCreate(ctx context.Context, env *Env, args []string) error {
	var families, splits, compression, granularity string
	ctx, done, c, pos, err := env.session(ctx, args, 1, 1, func(fs flagSet) {
		fs.StringVar(&families, "families", "", "column families: CF[:maxversions=N][:maxage=DURATION][:compression=CODEC][:intsum|intmin|intmax],...")
		fs.StringVar(&splits, "splits", "", "comma-separated split keys")
		fs.StringVar(&compression, "compression", "", "compression of the families that name none: none, snappy (the default) or zstd")
		fs.StringVar(&granularity, "granularity", "micros", "timestamp granularity, fixed at creation: micros (the default) or millis (Cloud Bigtable's)")
	})
	if err != nil {
		return err
	}
	defer done()
	fams, err := parseFamilies(families)
	if err != nil {
		return err
	}
	comp, err := parseCompressionFlag(compression)
	if err != nil {
		return err
	}
	for i := range fams {
		if fams[i].Compression == client.CompressionDefault {
			fams[i].Compression = comp
		}
	}
	var gran client.TimestampGranularity
	switch granularity {
	case "micros":
	case "millis":
		gran = client.GranularityMillis
	default:
		return Usagef("--granularity %q: use micros or millis", granularity)
	}
	if len(fams) == 0 {
		return Usagef("--families is required\nusage: %s", env.usage())
	}
	spec := client.TableSpec{Name: pos[0], Families: fams, SplitKeys: splitList(splits), Granularity: gran}
	if err := c.CreateTable(ctx, spec); err != nil {
		return err
	}
	return env.result(map[string]any{"created": pos[0], "tablets": len(spec.SplitKeys) + 1},
		"created table %s with %d tablets", pos[0], len(spec.SplitKeys)+1)
}

func runDrop(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 1, 1, nil)
	if err != nil {
		return err
	}
	defer done()
	if err := c.DeleteTable(ctx, pos[0]); err != nil {
		return err
	}
	return env.result(map[string]any{"dropped": pos[0]}, "dropped table %s", pos[0])
}

func runTables(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, _, err := env.session(ctx, args, 0, 0, nil)
	if err != nil {
		return err
	}
	defer done()
	infos, err := c.DescribeTables(ctx)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, t := range infos {
		var fams []string
		var jf []map[string]any
		for _, f := range t.Families {
			fams = append(fams, familyString(f))
			jf = append(jf, map[string]any{"name": f.Name, "max_versions": f.MaxVersions, "max_age": f.MaxAge.String(), "gc_policy": gcPolicyJSON(f.GCPolicy),
				"compression": compressionName(f.Compression)})
		}
		if env.JSON {
			if err := env.object(map[string]any{"name": t.Name, "tablets": t.TabletCount, "families": jf, "cache_priority": t.CachePriority.String(),
				"granularity": t.Granularity.String()}); err != nil {
				return err
			}
			continue
		}
		rows = append(rows, []string{t.Name, strconv.Itoa(t.TabletCount), strings.Join(fams, ","), t.CachePriority.String(), t.Granularity.String()})
	}
	if env.JSON {
		return nil
	}
	return env.Table([]string{"TABLE", "TABLETS", "FAMILIES", "CACHE", "GRANULARITY"}, rows)
}

// gcPolicyJSON is a family's GC policy set by setgcpolicy, "" for none.
func gcPolicyJSON(p client.GCPolicy) string {
	if p == nil {
		return ""
	}
	return p.String()
}

func familyString(f client.FamilySpec) string {
	s := f.Name
	if f.MaxVersions > 0 {
		s += fmt.Sprintf(":maxversions=%d", f.MaxVersions)
	}
	if f.MaxAge > 0 {
		s += ":maxage=" + f.MaxAge.String()
	}
	if f.GCPolicy != nil {
		s += ":gc=" + policyString(f.GCPolicy)
	}
	if f.Compression != client.CompressionDefault {
		s += ":compression=" + f.Compression.String()
	}
	if f.Aggregate != client.NoAggregate {
		s += ":" + f.Aggregate.String()
	}
	return s
}

func runTablets(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 1, 1, nil)
	if err != nil {
		return err
	}
	defer done()
	tablets, err := c.Tablets(ctx, pos[0])
	if err != nil {
		return err
	}
	var rows [][]string
	for _, t := range tablets {
		if env.JSON {
			obj := map[string]any{
				"tablet": t.ID, "start": t.StartRow, "end": t.EndRow, "state": t.State,
				"tserver": t.TServer, "epoch": t.Epoch, "size_bytes": t.SizeBytes,
			}
			if sp := t.Space; sp.Known {
				obj["file_bytes"], obj["live_bytes"] = sp.FileBytes, sp.LiveBytes()
				obj["data_bytes"], obj["raw_bytes"] = sp.DataBytes, sp.RawBytes
				obj["compression_ratio"], obj["tombstone_share"] = sp.CompressionRatio(), sp.TombstoneShare()
				obj["entries"], obj["tombstones"] = sp.Entries, sp.Tombstones
				obj["garbage_share"] = sp.GarbageShare
			}
			err := env.object(obj)
			if err != nil {
				return err
			}
			continue
		}
		size := "-"
		if t.SizeBytes >= 0 {
			size = humanBytes(t.SizeBytes)
		}
		end := show(t.EndRow)
		if t.EndRow == "" {
			end = "∞"
		}
		srv := t.TServer
		if srv == "" {
			srv = "-"
		}
		live, files, ratio, tomb := "-", "-", "-", "-"
		if sp := t.Space; sp.Known {
			live, files = humanBytes(sp.LiveBytes()), humanBytes(sp.FileBytes)
			tomb = fmt.Sprintf("%.1f%%", 100*sp.TombstoneShare())
			if sp.RawBytes > 0 {
				ratio = fmt.Sprintf("%.2f", sp.CompressionRatio())
			}
		}
		rows = append(rows, []string{t.ID, show(t.StartRow), end, t.State, srv, strconv.FormatInt(t.Epoch, 10), size, live, files, ratio, tomb})
	}
	if env.JSON {
		return nil
	}
	return env.Table([]string{"TABLET", "START", "END", "STATE", "TSERVER", "EPOCH", "SIZE", "LIVE", "FILES", "RATIO", "TOMBSTONES"}, rows)
}

func runTServers(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, _, err := env.session(ctx, args, 0, 0, nil)
	if err != nil {
		return err
	}
	defer done()
	servers, err := c.TServers(ctx)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, s := range servers {
		hb := "-"
		if !s.LastHeartbeat.IsZero() {
			hb = s.LastHeartbeat.UTC().Format(time.RFC3339Nano)
		}
		if env.JSON {
			if err := env.object(map[string]any{"address": s.Address, "uuid": s.UUID, "live": s.Live, "tablets": s.Tablets, "last_heartbeat": hb}); err != nil {
				return err
			}
			continue
		}
		rows = append(rows, []string{s.Address, s.UUID, strconv.FormatBool(s.Live), strconv.Itoa(s.Tablets), hb})
	}
	if env.JSON {
		return nil
	}
	return env.Table([]string{"ADDRESS", "UUID", "LIVE", "TABLETS", "LAST HEARTBEAT"}, rows)
}

func openTable(ctx context.Context, c *client.Client, name string) (*client.Table, error) {
	return c.Open(ctx, name)
}

func runPut(ctx context.Context, env *Env, args []string) error {
	ts := int64(-2)
	ctx, done, c, pos, err := env.session(ctx, args, 4, 4, func(fs flagSet) {
		fs.Int64Var(&ts, "timestamp", ts, "cell timestamp in microseconds (default: the client's clock; -1: the server's)")
	})
	if err != nil {
		return err
	}
	defer done()
	fam, qual, ok := strings.Cut(pos[2], ":")
	if !ok {
		return Usagef("column %q is not FAMILY:QUALIFIER", pos[2])
	}
	tbl, err := openTable(ctx, c, pos[0])
	if err != nil {
		return err
	}
	if ts == -2 {
		err = tbl.Put(ctx, pos[1], fam, qual, []byte(pos[3]))
	} else {
		m := client.NewMutation()
		m.Set(fam, qual, ts, []byte(pos[3]))
		err = tbl.Apply(ctx, pos[1], m)
	}
	if err != nil {
		return err
	}
	return env.result(map[string]any{"put": pos[1], "column": pos[2]}, "ok")
}

// readArgs are the flags get and scan share.
type readArgs struct {
	families, columns string
	versions          int
	keysOnly          bool
}

func readFlags(fs flagSet, a *readArgs) {
	fs.StringVar(&a.families, "families", "", "only these comma-separated column families")
	fs.StringVar(&a.columns, "columns", "", "only these comma-separated columns, each FAMILY:QUALIFIER or FAMILY (with --families: the union)")
	fs.IntVar(&a.versions, "versions", 0, "at most this many versions per column (0: the families' policy)")
	fs.BoolVar(&a.keysOnly, "keys-only", false, "return cells without their values (a server-side strip-value filter)")
}

func readOptions(a readArgs) ([]client.ReadOption, error) {
	var opts []client.ReadOption
	if fams := splitList(a.families); len(fams) > 0 {
		opts = append(opts, client.Families(fams...))
	}
	for _, col := range splitList(a.columns) {
		fam, qual, ok := strings.Cut(col, ":")
		if fam == "" {
			return nil, Usagef("--columns: %q has no family (want FAMILY:QUALIFIER or FAMILY)", col)
		}
		if ok {
			opts = append(opts, client.Column(fam, qual))
		} else {
			opts = append(opts, client.Families(fam))
		}
	}
	if a.versions != 0 {
		opts = append(opts, client.LatestN(a.versions))
	}
	if a.keysOnly {
		opts = append(opts, client.RowFilter(client.StripValueFilter()))
	}
	return opts, nil
}

// prefixEnd returns the first key after every key with prefix p ("" if
// none: p is empty or all 0xff bytes).
func prefixEnd(p string) string {
	b := []byte(p)
	for len(b) > 0 && b[len(b)-1] == 0xff {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return ""
	}
	b[len(b)-1]++
	return string(b)
}

func runGet(ctx context.Context, env *Env, args []string) error {
	var ra readArgs
	ctx, done, c, pos, err := env.session(ctx, args, 2, 2, func(fs flagSet) { readFlags(fs, &ra) })
	if err != nil {
		return err
	}
	defer done()
	opts, err := readOptions(ra)
	if err != nil {
		return err
	}
	tbl, err := openTable(ctx, c, pos[0])
	if err != nil {
		return err
	}
	row, err := tbl.Get(ctx, pos[1], opts...)
	if err != nil {
		return err
	}
	if len(row.Cells) == 0 {
		if env.JSON {
			return env.object(rowObject(row))
		}
		fmt.Fprintf(env.Stdout, "row %s not found\n", show(pos[1]))
		return nil
	}
	if env.JSON {
		return env.object(rowObject(row))
	}
	return env.Table(cellHeader, cellRows(nil, row))
}

func runScan(ctx context.Context, env *Env, args []string) error {
	var start, end, prefix, regex, keys string
	var limit int64
	var reverse, count bool
	var ra readArgs
	ctx, done, c, pos, err := env.session(ctx, args, 1, 1, func(fs flagSet) {
		fs.StringVar(&start, "start", "", "first row (inclusive)")
		fs.StringVar(&end, "end", "", "last row (exclusive; empty: to the end)")
		fs.StringVar(&prefix, "prefix", "", "only rows whose key starts with this (instead of --start and --end)")
		fs.StringVar(&regex, "regex", "", "only rows whose whole key matches this RE2 regex (a server-side row key filter)")
		fs.Int64Var(&limit, "limit", 0, "at most this many rows (0: all; with --reverse: the last rows)")
		fs.StringVar(&keys, "keys", "", "only these comma-separated rows (a row list; instead of --start, --end and --prefix)")
		fs.BoolVar(&reverse, "reverse", false, "rows in descending key order")
		fs.BoolVar(&count, "count", false, "print only the number of rows that match (a key-only scan: one cell per row, no values)")
		readFlags(fs, &ra)
	})
	if err != nil {
		return err
	}
	defer done()
	if limit < 0 {
		return Usagef("--limit %d is negative", limit)
	}
	if prefix != "" {
		if start != "" || end != "" {
			return Usagef("--prefix cannot be combined with --start or --end")
		}
		start, end = prefix, prefixEnd(prefix)
	}
	var rs client.RowSet = client.NewRange(start, end)
	if keys != "" {
		if start != "" || end != "" {
			return Usagef("--keys cannot be combined with --start, --end or --prefix")
		}
		rs = client.RowList(splitList(keys))
	}
	opts, err := readOptions(ra)
	if err != nil {
		return err
	}
	if regex != "" {
		opts = append(opts, client.RowFilter(client.RowKeyFilter(regex)))
	}
	if reverse {
		opts = append(opts, client.ReverseScan())
	}
	if count {
		// The rows are counted, not shown: the tserver sends each one's
		// key and one empty cell.
		opts = append(opts, client.RowFilter(client.CellsPerRowLimitFilter(1)), client.RowFilter(client.StripValueFilter()))
	}
	tbl, err := openTable(ctx, c, pos[0])
	if err != nil {
		return err
	}
	if limit > 0 {
		opts = append(opts, client.LimitRows(limit))
	}
	var rows [][]string
	var werr error
	n := 0
	err = tbl.ReadRows(ctx, rs, func(r client.Row) bool {
		n++
		if count {
			return true
		}
		if env.JSON {
			werr = env.object(rowObject(r))
			return werr == nil
		}
		rows = cellRows(rows, r)
		return true
	}, opts...)
	if err != nil {
		return err
	}
	if count {
		return env.result(map[string]any{"count": n}, "%d", n)
	}
	if werr != nil || env.JSON {
		return werr
	}
	if err := env.Table(cellHeader, rows); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "%d rows\n", n)
	return nil
}

func runDelete(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 2, 3, nil)
	if err != nil {
		return err
	}
	defer done()
	return deleteCells(ctx, env, c, pos)
}

// deleteCells deletes row pos[1] of table pos[0], or its family pos[2],
// or its column pos[2] (FAMILY:QUALIFIER).
func deleteCells(ctx context.Context, env *Env, c *client.Client, pos []string) error {
	tbl, err := openTable(ctx, c, pos[0])
	if err != nil {
		return err
	}
	m := client.NewMutation()
	what := "row " + pos[1]
	switch {
	case len(pos) == 2:
		m.DeleteRow()
	case strings.Contains(pos[2], ":"):
		fam, qual, _ := strings.Cut(pos[2], ":")
		m.DeleteCellsInColumn(fam, qual)
		what = fmt.Sprintf("column %s of row %s", pos[2], pos[1])
	default:
		m.DeleteCellsInFamily(pos[2])
		what = fmt.Sprintf("family %s of row %s", pos[2], pos[1])
	}
	if err := tbl.Apply(ctx, pos[1], m); err != nil {
		return err
	}
	return env.result(map[string]any{"deleted": what}, "deleted %s", what)
}

func runCheckpoint(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 0, -1, nil)
	if err != nil {
		return err
	}
	defer done()
	var results []client.CheckpointResult
	if len(pos) == 0 {
		results, err = c.CheckpointAll(ctx)
	} else {
		for _, addr := range pos {
			var r client.CheckpointResult
			if r, err = c.Checkpoint(ctx, addr); err != nil {
				break
			}
			results = append(results, r)
		}
	}
	var rows [][]string
	for _, r := range results {
		if env.JSON {
			if jerr := env.object(map[string]any{"tserver": r.TServer, "tablets_flushed": r.TabletsFlushed, "bytes_flushed": r.BytesFlushed}); jerr != nil {
				return jerr
			}
			continue
		}
		rows = append(rows, []string{r.TServer, strconv.Itoa(r.TabletsFlushed), humanBytes(r.BytesFlushed)})
	}
	if !env.JSON && len(rows) > 0 {
		if terr := env.Table([]string{"TSERVER", "TABLETS FLUSHED", "BYTES FLUSHED"}, rows); terr != nil {
			return terr
		}
	}
	return err
}

func runSplit(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 2, 2, nil)
	if err != nil {
		return err
	}
	defer done()
	if err := c.SplitTablet(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	return env.result(map[string]any{"split": pos[0], "row": pos[1]}, "asked to split table %s at row %s", pos[0], show(pos[1]))
}
