package tablet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/encoding/prototext"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/filter"
)

// TestReadsDataDriven runs the cases of testdata/reads: mutations applied
// through the write path's calls (AssignTimestamps, then Apply), buffers
// swapped and flushed to TSFiles, compactions, restarts, and reads (Get,
// Scan, ScanRanges reversed) with selections and RowFilters, printing the
// cells as ROW/FAMILY:QUALIFIER@TS=VALUE. The expected outputs follow
// doc.go and docs/data-model.md: deletes hide what was written before them
// in write order, whatever the timestamps; the same cell written again is
// overwritten; GC rules count live versions; reads see the same cells from
// buffers and files. The clock is fake; no randomness. Commands:
//
//	schema                  one family a line: "NAME [maxversions=N]
//	                        [maxage=DUR] [rule=RULE] [agg=sum|min|max]",
//	                        RULE one of versions(N), age(DUR),
//	                        union(RULE,...), intersection(RULE,...), none
//	                        (agg: an aggregate family, its cells printed
//	                        as #INT64)
//	clock us=N              set the clock (µs)
//	write                   one row mutation a line: "ROW OP OP ...", OP one
//	                        of set:F:Q@TS=VALUE (TS "now": the server's),
//	                        add:F:Q@TS=INT64 (a MergeCell operand),
//	                        delcol:F:Q (every version), delcol:F:Q@START-END
//	                        (END empty: unbounded), delfam:F, delrow
//	swap                    SwapBuffers: the active buffer becomes standby
//	flush                   swap if need be, write the standby buffer as a
//	                        TSFile and install it
//	compact [major] [newest=N]   compact the newest N files (default all)
//	reopen                  close, open again on the TSFiles (the write
//	                        buffers are lost: no log here)
//	files                   the TSFiles, newest first
//	get row=R [families=(F,...)] [columns=(F:Q,...)] [versions=N]
//	    [time=START-END]    input: a RowFilter in protobuf text, optional
//	scan [start=K] [end=K] [limit=N] [reverse] [the options of get]
//	scan ranges=(A-B,C-D) ... several ranges, one snapshot
//
// Regenerate the expected output with
//
//	go test ./storage/tablet -run DataDriven -rewrite
//
// and read every changed line before committing it.
func TestReadsDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/reads", func(t *testing.T, path string) {
		r := &ddTablet{store: newStore(t), clock: &fakeClock{}}
		r.clock.us.Store(1000)
		r.open(t, nil)
		defer func() { r.tb.Close() }()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return r.run(t, d)
		})
	})
}

type ddTablet struct {
	store  blockstore.Manager
	clock  *fakeClock
	schema Schema
	tb     *Tablet
}

func (r *ddTablet) open(t *testing.T, files []FileRef) {
	tb, err := Open(Options{ID: "dd", Schema: r.schema, Store: r.store, Now: r.clock.now, Files: files, PageSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	r.tb = tb
}

func (r *ddTablet) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "schema":
		s := Schema{Families: map[string]FamilyPolicy{}}
		for _, line := range strings.Split(d.Input, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			var p FamilyPolicy
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				var err error
				switch k {
				case "maxversions":
					p.MaxVersions, err = strconv.Atoi(v)
				case "maxage":
					p.MaxAge, err = time.ParseDuration(v)
				case "rule":
					var g GCRule
					g, err = ddRule(v)
					p.Rule = &g
				case "agg":
					p.Aggregate = map[string]Aggregator{"sum": Sum, "min": Min, "max": Max}[v]
					if p.Aggregate == NoAggregate {
						err = fmt.Errorf("unknown aggregator %q", v)
					}
				default:
					err = fmt.Errorf("unknown field %q", k)
				}
				if err != nil {
					d.Fatalf(t, "%s: %v", line, err)
				}
			}
			s.Families[f[0]] = p
		}
		r.schema = s
		r.tb.SetSchema(s)
		return ""
	case "clock":
		var us int64
		d.ScanArgs(t, "us", &us)
		r.clock.us.Store(us)
		return ""
	case "write":
		var b strings.Builder
		for _, line := range strings.Split(d.Input, "\n") {
			m, err := ddMutation(line)
			if err != nil {
				d.Fatalf(t, "%s: %v", line, err)
			}
			if err := r.tb.AssignTimestamps(m); err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
				continue
			}
			if err := r.tb.Apply(m); err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
				continue
			}
			fmt.Fprintf(&b, "seq %d:", m.Seq)
			for _, op := range m.Ops {
				b.WriteString(" " + ddOp(op))
			}
			b.WriteString("\n")
		}
		return b.String()
	case "swap":
		return fmt.Sprintf("swapped: %v\n", r.tb.SwapBuffers())
	case "flush":
		if !r.tb.HasStandby() && !r.tb.SwapBuffers() {
			return "nothing to flush\n"
		}
		info, err := r.tb.FlushStandby(ctx)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		if err := r.tb.InstallFlushed(info); err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		return ddFile(info)
	case "compact":
		files := r.tb.Files()
		n := len(files)
		d.MaybeScanArgs(t, "newest", &n)
		var refs []blockstore.BlockRef
		for _, f := range files[:n] {
			refs = append(refs, f.FooterRef())
		}
		info, err := r.tb.CompactFiles(ctx, refs, d.HasArg("major"))
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		if err := r.tb.InstallCompacted(refs, info); err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		if info.Footer == 0 {
			return "nothing left\n"
		}
		return ddFile(info)
	case "reopen":
		var refs []FileRef
		for _, f := range r.tb.Files() {
			refs = append(refs, FileRef{Footer: f.FooterRef()})
		}
		if err := r.tb.Close(); err != nil {
			t.Fatal(err)
		}
		r.open(t, refs)
		return fmt.Sprintf("flushed seq %d\n", r.tb.FlushedSeq())
	case "files":
		var b strings.Builder
		for _, f := range r.tb.Files() {
			b.WriteString(ddFile(f))
		}
		return b.String()
	case "get":
		var row string
		d.ScanArgs(t, "row", &row)
		opts, err := ddReadOptions(t, d)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		got, found, err := r.tb.Get(ctx, []byte(row), opts)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		if !found {
			return "not found\n"
		}
		return ddRow(got, &r.schema)
	case "scan":
		opts, err := ddReadOptions(t, d)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		var limit int
		d.MaybeScanArgs(t, "limit", &limit)
		var ranges []KeyRange
		if arg, ok := d.Arg("ranges"); ok {
			for _, v := range arg.Vals {
				s, e, _ := strings.Cut(v, "-")
				kr := KeyRange{Start: []byte(s)}
				if e != "" {
					kr.End = []byte(e)
				}
				ranges = append(ranges, kr)
			}
		} else {
			var kr KeyRange
			if arg, ok := d.Arg("start"); ok {
				kr.Start = []byte(arg.SingleVal(t))
			}
			if arg, ok := d.Arg("end"); ok {
				kr.End = []byte(arg.SingleVal(t))
			}
			ranges = []KeyRange{kr}
		}
		var b strings.Builder
		rows := 0
		err = r.tb.ScanRanges(ctx, ranges, d.HasArg("reverse"), limit, opts, func(row Row) bool {
			b.WriteString(ddRow(row, &r.schema))
			rows++
			return true
		})
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		fmt.Fprintf(&b, "%d rows\n", rows)
		return b.String()
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// ddReadOptions reads the selection arguments and the RowFilter input; the
// error is the filter's compilation's.
func ddReadOptions(t *testing.T, d *datadriven.TestData) (ReadOptions, error) {
	var o ReadOptions
	if arg, ok := d.Arg("families"); ok {
		o.Families = arg.Vals
	}
	if arg, ok := d.Arg("columns"); ok {
		for _, v := range arg.Vals {
			f, q, _ := strings.Cut(v, ":")
			o.Columns = append(o.Columns, Column{Family: f, Qualifier: []byte(q)})
		}
	}
	d.MaybeScanArgs(t, "versions", &o.MaxVersions)
	if arg, ok := d.Arg("time"); ok {
		s, e, _ := strings.Cut(arg.SingleVal(t), "-")
		var err error
		if o.TimeRange.Start, err = strconv.ParseInt(s, 10, 64); err == nil && e != "" {
			o.TimeRange.End, err = strconv.ParseInt(e, 10, 64)
		}
		if err != nil {
			d.Fatalf(t, "time=%s: want START-END", arg.SingleVal(t))
		}
	}
	if strings.TrimSpace(d.Input) != "" {
		var pf btpb.RowFilter
		if err := prototext.Unmarshal([]byte(d.Input), &pf); err != nil {
			d.Fatalf(t, "filter: %v", err)
		}
		f, err := filter.Compile(&pf)
		if err != nil {
			return o, err
		}
		o.Filter = f
	}
	return o, nil
}

// ddMutation parses "ROW OP OP ...".
func ddMutation(line string) (*mutation.RowMutation, error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return nil, errors.New("want ROW OP ...")
	}
	m := &mutation.RowMutation{Row: []byte(f[0])}
	for _, s := range f[1:] {
		kind, arg, _ := strings.Cut(s, ":")
		var op mutation.Op
		switch kind {
		case "set":
			col, val, ok := strings.Cut(arg, "=")
			if !ok {
				return nil, fmt.Errorf("%s: want set:F:Q@TS=VALUE", s)
			}
			fam, q, ts, ok := ddColumn(col)
			if !ok || ts == "" {
				return nil, fmt.Errorf("%s: want set:F:Q@TS=VALUE", s)
			}
			op = mutation.Op{Kind: mutation.SetCell, Family: fam, Qualifier: q, Value: []byte(val)}
			var err error
			if op.Timestamp, err = ddTimestamp(ts); err != nil {
				return nil, fmt.Errorf("%s: %v", s, err)
			}
		case "delcol":
			fam, q, ts, ok := ddColumn(arg)
			if !ok {
				return nil, fmt.Errorf("%s: want delcol:F:Q[@START-END]", s)
			}
			op = mutation.Op{Kind: mutation.DeleteColumn, Family: fam, Qualifier: q}
			if ts != "" {
				start, end, _ := strings.Cut(ts, "-")
				var err error
				if op.Timestamp, err = ddTimestamp(start); err == nil && end != "" {
					op.End, err = strconv.ParseInt(end, 10, 64)
				}
				if err != nil {
					return nil, fmt.Errorf("%s: %v", s, err)
				}
			}
		case "add":
			col, val, ok := strings.Cut(arg, "=")
			fam, q, ts, ok2 := ddColumn(col)
			if !ok || !ok2 || ts == "" {
				return nil, fmt.Errorf("%s: want add:F:Q@TS=INT64", s)
			}
			v, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", s, err)
			}
			op = mutation.Op{Kind: mutation.MergeCell, Family: fam, Qualifier: q, Value: binary.BigEndian.AppendUint64(nil, uint64(v))}
			if op.Timestamp, err = ddTimestamp(ts); err != nil {
				return nil, fmt.Errorf("%s: %v", s, err)
			}
		case "delfam":
			op = mutation.Op{Kind: mutation.DeleteFamily, Family: arg, Timestamp: mutation.ServerTime}
		case "delrow":
			op = mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime}
		default:
			return nil, fmt.Errorf("unknown op %q", s)
		}
		m.Ops = append(m.Ops, op)
	}
	return m, nil
}

// ddColumn splits "F:Q[@TS]".
func ddColumn(s string) (fam string, qual []byte, ts string, ok bool) {
	fam, rest, ok := strings.Cut(s, ":")
	q, ts, _ := strings.Cut(rest, "@")
	return fam, []byte(q), ts, ok
}

func ddTimestamp(s string) (int64, error) {
	if s == "now" {
		return mutation.ServerTime, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// ddOp prints an op as it was applied.
func ddOp(op mutation.Op) string {
	switch op.Kind {
	case mutation.SetCell:
		return fmt.Sprintf("set:%s:%s@%d=%s", op.Family, op.Qualifier, op.Timestamp, op.Value)
	case mutation.DeleteColumn:
		end := ""
		if op.End != 0 {
			end = strconv.FormatInt(op.End, 10)
		}
		return fmt.Sprintf("delcol:%s:%s@%d-%s", op.Family, op.Qualifier, op.Timestamp, end)
	case mutation.DeleteFamily:
		return "delfam:" + op.Family
	case mutation.DeleteRow:
		return "delrow"
	case mutation.MergeCell:
		return fmt.Sprintf("add:%s:%s@%d=%d", op.Family, op.Qualifier, op.Timestamp, int64(binary.BigEndian.Uint64(op.Value)))
	}
	return op.Kind.String()
}

// ddRule parses a GC rule.
func ddRule(s string) (GCRule, error) {
	name, args, ok := strings.Cut(s, "(")
	if name == "none" && !ok {
		return GCRule{}, nil
	}
	if !ok || !strings.HasSuffix(args, ")") {
		return GCRule{}, fmt.Errorf("rule %q: want versions(N), age(DUR), union(...), intersection(...) or none", s)
	}
	args = args[:len(args)-1]
	switch name {
	case "versions":
		n, err := strconv.Atoi(args)
		return GCRule{Kind: GCMaxVersions, MaxVersions: n}, err
	case "age":
		d, err := time.ParseDuration(args)
		return GCRule{Kind: GCMaxAge, MaxAge: d}, err
	case "union", "intersection":
		g := GCRule{Kind: GCUnion}
		if name == "intersection" {
			g.Kind = GCIntersection
		}
		for depth, from, i := 0, 0, 0; i <= len(args); i++ {
			if i < len(args) && args[i] == '(' {
				depth++
			} else if i < len(args) && args[i] == ')' {
				depth--
			} else if i == len(args) && i > from || i < len(args) && args[i] == ',' && depth == 0 {
				sub, err := ddRule(args[from:i])
				if err != nil {
					return GCRule{}, err
				}
				g.Rules = append(g.Rules, sub)
				from = i + 1
			}
		}
		return g, nil
	}
	return GCRule{}, fmt.Errorf("rule %q: unknown kind %q", s, name)
}

// ddRow prints a row's cells, one a line; a cell of an aggregate family of
// s as #INT64 when its value is 8 bytes (a read's strip_value leaves none).
func ddRow(row Row, s *Schema) string {
	var b strings.Builder
	for _, c := range row.Cells {
		if s.Families[c.Family].Aggregate != NoAggregate && len(c.Value) == OperandLen {
			fmt.Fprintf(&b, "%s/%s:%s@%d=#%d", row.Key, c.Family, c.Qualifier, c.Timestamp, int64(binary.BigEndian.Uint64(c.Value)))
		} else {
			fmt.Fprintf(&b, "%s/%s:%s@%d=%s", row.Key, c.Family, c.Qualifier, c.Timestamp, c.Value)
		}
		if len(c.Labels) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(c.Labels, ","))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ddFile prints what a TSFile holds.
func ddFile(info TSFileInfo) string {
	return fmt.Sprintf("file: %d entries (%d tombstones), rows %s..%s, max seq %d\n",
		info.Entries, info.Tombstones, info.MinRow, info.MaxRow, info.MaxSeq)
}
