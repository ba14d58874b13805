// Package demo is the scripted tour behind `bighive demo`: it starts a
// fresh local cluster of real processes (one master, three tservers) in a
// temporary directory, and walks through what Bighive does, printing each
// step and its time. Every step checks its result; the tour fails loudly
// if anything is lost.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
)

// Options configure a tour.
type Options struct {
	// Rows to load (default 100 000).
	Rows int
	// Dir holds the cluster (default: a new temporary directory, removed
	// afterwards unless Keep).
	Dir  string
	Keep bool
	Out  io.Writer
}

type tour struct {
	out   io.Writer
	began time.Time
	step  int
}

func (t *tour) stepf(format string, args ...any) func() {
	t.step++
	start := time.Now()
	fmt.Fprintf(t.out, "\n[%d] %s\n", t.step, fmt.Sprintf(format, args...))
	return func() { fmt.Fprintf(t.out, "    done in %v\n", time.Since(start).Round(time.Millisecond)) }
}

func (t *tour) printf(format string, args ...any) { fmt.Fprintf(t.out, "    "+format+"\n", args...) }

// Run runs the tour.
func Run(ctx context.Context, opts Options) (err error) {
	if opts.Rows <= 0 {
		opts.Rows = 100_000
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	t := &tour{out: opts.Out, began: time.Now()}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "bighive-demo-"); err != nil {
			return err
		}
		if !opts.Keep {
			defer os.RemoveAll(dir)
		}
	}

	done := t.stepf("Start a local cluster: 1 master and 3 tservers as real processes under %s", dir)
	c, err := cluster.Start(ctx, cluster.Options{Masters: 1, TServers: 3, Dir: dir, Flags: []string{"--mem-limit=16777216"},
		Lease: failoverLease, Heartbeat: failoverHeartbeat})
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	defer c.Close()
	t.printf("master   %s", strings.Join(c.MasterAddrs(), ","))
	for i := 0; i < c.NumTServers(); i++ {
		t.printf("tserver  %s", c.TServerAddr(i))
	}
	cl, err := client.Dial(ctx, c.MasterAddrs())
	if err != nil {
		return err
	}
	defer cl.Close()
	done()

	const table = "users"
	var splits []string
	for i := 1; i < 8; i++ {
		splits = append(splits, rowKey(i*opts.Rows/8))
	}
	done = t.stepf("Create table %q pre-split into 8 tablets, families profile and stats(max 3 versions)", table)
	if err := cl.CreateTable(ctx, client.TableSpec{Name: table, SplitKeys: splits,
		Families: []client.FamilySpec{{Name: "profile"}, {Name: "stats", MaxVersions: 3}}}); err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	if err := c.WaitServing(ctx, table); err != nil {
		return err
	}
	if err := printTablets(ctx, t, cl, table); err != nil {
		return err
	}
	tbl, err := cl.Open(ctx, table)
	if err != nil {
		return err
	}
	done()

	done = t.stepf("Load %d rows with ApplyBulk (batches of 500; every write durable before it is acknowledged)", opts.Rows)
	loadStart := time.Now()
	const batch = 500
	for from := 0; from < opts.Rows; from += batch {
		to := min(from+batch, opts.Rows)
		keys := make([]string, 0, to-from)
		ms := make([]*client.Mutation, 0, to-from)
		for i := from; i < to; i++ {
			m := client.NewMutation()
			m.Set("profile", "name", client.ServerTime, []byte(fmt.Sprintf("user %d", i)))
			m.Set("profile", "email", client.ServerTime, []byte(fmt.Sprintf("user%d@example.com", i)))
			m.Set("stats", "visits", client.ServerTime, []byte(fmt.Sprint(i%97)))
			keys = append(keys, rowKey(i))
			ms = append(ms, m)
		}
		errs, err := tbl.ApplyBulk(ctx, keys, ms)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		for i, e := range errs {
			if e != nil {
				return fmt.Errorf("load row %s: %w", keys[i], e)
			}
		}
		progress(t.out, to, opts.Rows, loadStart)
	}
	fmt.Fprintln(t.out)
	t.printf("%.0f rows/s", float64(opts.Rows)/time.Since(loadStart).Seconds())
	done()

	done = t.stepf("Read: get one row, scan a range")
	probe := rowKey(opts.Rows / 3)
	row, err := tbl.Get(ctx, probe)
	if err != nil {
		return err
	}
	if v, _ := row.Value("profile", "name"); string(v) != fmt.Sprintf("user %d", opts.Rows/3) {
		return fmt.Errorf("get %s: got %q", probe, v)
	}
	t.printf("get %s → %d cells, profile:name=%q", probe, len(row.Cells), mustValue(row, "profile", "name"))
	var scanned []string
	if err := tbl.Scan(ctx, rowKey(opts.Rows/8-2), "", func(r client.Row) bool {
		scanned = append(scanned, r.Key)
		return len(scanned) < 5
	}); err != nil {
		return err
	}
	t.printf("scan from %s (crossing a tablet boundary), first 5: %s", rowKey(opts.Rows/8-2), strings.Join(scanned, " "))
	done()

	done = t.stepf("Checkpoint: every tserver swaps its write buffers and flushes them as TSFiles")
	res, err := cl.CheckpointAll(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	for _, r := range res {
		t.printf("%-21s flushed %d tablets", r.TServer, r.TabletsFlushed)
	}
	done()

	done = t.stepf("Restart tserver %s (SIGTERM, start again on the same address and data)", c.TServerAddr(0))
	if err := c.StopTServer(0); err != nil {
		return err
	}
	if err := c.RestartTServer(0); err != nil {
		return err
	}
	if err := c.WaitServing(ctx, table); err != nil {
		return err
	}
	done()

	done = t.stepf("Verify: a full scan sees every one of the %d rows", opts.Rows)
	n, prev := 0, ""
	if err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
		if r.Key <= prev {
			err = fmt.Errorf("scan out of order: %s after %s", r.Key, prev)
			return false
		}
		prev = r.Key
		n++
		return true
	}); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	if n != opts.Rows {
		return fmt.Errorf("scan found %d rows, want %d", n, opts.Rows)
	}
	t.printf("%d rows, in order", n)
	done()

	if err := bigtableChapter(ctx, t, c); err != nil {
		return err
	}

	if err := failoverChapter(ctx, t, c, cl, tbl, table, opts.Rows); err != nil {
		return err
	}

	if err := splitChapter(ctx, t, dir); err != nil {
		return err
	}

	fmt.Fprintf(t.out, "\nThe tour took %v. Every acknowledged row read back.\n", time.Since(t.began).Round(time.Millisecond))
	return nil
}

func rowKey(i int) string { return fmt.Sprintf("user%08d", i) }

func mustValue(r client.Row, fam, qual string) string {
	v, _ := r.Value(fam, qual)
	return string(v)
}

func printTablets(ctx context.Context, t *tour, cl *client.Client, table string) error {
	tablets, err := cl.Tablets(ctx, table)
	if err != nil {
		return err
	}
	for _, tb := range tablets {
		end := tb.EndRow
		if end == "" {
			end = "∞"
		}
		start := tb.StartRow
		if start == "" {
			start = "-∞"
		}
		t.printf("%-6s [%s, %s)  %-8s on %s (epoch %d)", tb.ID, start, end, tb.State, tb.TServer, tb.Epoch)
	}
	return nil
}

func progress(w io.Writer, done, total int, since time.Time) {
	const width = 40
	filled := done * width / total
	fmt.Fprintf(w, "\r    [%s%s] %3d%% %7d rows %6.1fs", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		done*100/total, done, time.Since(since).Seconds())
}
