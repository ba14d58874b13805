package e2e_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

var (
	soakDuration = flag.Duration("soak.duration", 30*time.Second, "how long TestSoakNoLostWrites writes under chaos (e.g. 10m with -timeout 30m)")
	soakSeed     = flag.Int64("soak.seed", 0, "seed of TestSoakNoLostWrites's choices (0: the time)")
	soakLogs     = flag.String("soak.logs", "", "a `dir`ectory where TestSoakNoLostWrites copies the processes' logs when it fails")
)

const (
	soakTable   = "soak"
	soakWriters = 4
	soakOpWait  = 10 * time.Second // one write or delete, retries included
	soakMaxOps  = 250_000          // writes and deletes of one writer, at most
)

// soakTServerFlags make background work frequent: a checkpoint every
// 128 KiB of buffered writes, a merging compaction past two TSFiles, a
// major one every two seconds and after few deletes, all read at 512 KiB/s
// so that one often runs across a merge, a move or a fence, and automatic
// splits past 512 KiB. soakMasterFlags merge adjacent tablets under
// 128 KiB seen small for a second, checked twice a second. The tservers
// log at debug level, for the figures ("checkpoint done", "compaction
// done") and the report of a loss.
var (
	soakTServerFlags = []string{"--log-level=debug", "--mem-limit=131072", "--compaction-max-files=2",
		"--compaction-major-every=2s", "--compaction-garbage-share=0.05", "--compaction-duty=1", "--compaction-rate=524288",
		"--split-threshold=524288", "--split-interval=2s"}
	soakMasterFlags = []string{"--split-threshold=524288", "--merge-threshold=131072",
		"--merge-check-interval=500ms", "--merge-min-age=1s"}
)

// soakState is what the test knows of a row.
type soakState uint8

const (
	soakAcked         soakState = iota // the write was acknowledged: the row reads back with its value
	soakWriteUnknown                   // the write returned an error: its value or nothing
	soakDeleted                        // the delete was acknowledged: the row never reads back
	soakDeleteUnknown                  // the delete returned an error: the value or nothing
)

var soakStateNames = [...]string{"acknowledged", "write unknown", "deleted", "delete unknown"}

type soakRow struct {
	val   string // soakValue(val) was written
	state soakState
	at    time.Time // when the outcome was known
}

// soakLedger records each row's outcome, only once its call returned.
type soakLedger struct {
	mu                               sync.Mutex
	rows                             map[string]*soakRow
	writes, deletes, wErrs, dErrs    int
	merges, splits, compacts, ckpts  atomic.Int64 // requested ones that succeeded
	adminErrs                        atomic.Int64
	tsKills, tsStops, mKills, mStops atomic.Int64
	fenced                           atomic.Int64 // stopped tservers seen declared dead
}

func (l *soakLedger) record(row, val string, st soakState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rows[row]
	if r == nil {
		r = &soakRow{val: val}
		l.rows[row] = r
	}
	r.state, r.at = st, time.Now()
	switch st {
	case soakAcked:
		l.writes++
	case soakWriteUnknown:
		l.wErrs++
	case soakDeleted:
		l.deletes++
	case soakDeleteUnknown:
		l.dErrs++
	}
}

// soakValue is the value written for val: val and 50 to 249 bytes more,
// which the ledger need not hold.
func soakValue(val string) string { return val + strings.Repeat("x", 50+len(val)*37%200) }

// soakWriter writes fresh rows (unique keys, one cell each) until stop is
// closed, soakMaxOps at most; after one in five acknowledged writes it
// deletes one of its acknowledged rows instead. It rests 50 ms after an
// error.
func soakWriter(tbl *client.Table, l *soakLedger, rnd *rand.Rand, w int, stop <-chan struct{}) {
	var mine []string // acknowledged and not deleted
	for seq := 0; seq < soakMaxOps; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), soakOpWait)
		if len(mine) > 0 && rnd.Intn(5) == 0 {
			i := rnd.Intn(len(mine))
			row := mine[i]
			mine[i] = mine[len(mine)-1]
			mine = mine[:len(mine)-1]
			m := client.NewMutation()
			m.DeleteRow()
			st := soakDeleted
			if err := tbl.Apply(ctx, row, m); err != nil {
				st = soakDeleteUnknown
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			l.record(row, "", st)
			continue
		}
		row := fmt.Sprintf("s%06d-w%d-%07d", rnd.Intn(1_000_000), w, seq)
		val := fmt.Sprintf("v%d.%d.%x.", w, seq, rnd.Int63())
		st := soakAcked
		if err := tbl.Put(ctx, row, "cf", "q", []byte(soakValue(val))); err != nil {
			st = soakWriteUnknown
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		l.record(row, val, st)
		if st == soakAcked {
			mine = append(mine, row)
		}
	}
}

// soakAdmin asks for background work until stop is closed, one request
// every 0.3 to 1 s: with merging, merges of a random adjacent pair and
// splits at a random row; without, major or merging compactions of the
// table and checkpoints of a random tserver.
func soakAdmin(c *cluster.Cluster, cl *client.Client, l *soakLedger, rnd *rand.Rand, merging bool, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(300+rnd.Intn(700)) * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		var err error
		var done *atomic.Int64
		switch k := rnd.Intn(2); {
		case merging && k == 0:
			var tablets []client.TabletInfo
			if tablets, err = cl.Tablets(ctx, soakTable); err == nil && len(tablets) > 1 {
				_, err = cl.MergeTablets(ctx, soakTable, tablets[rnd.Intn(len(tablets)-1)].StartRow)
				done = &l.merges
			}
		case merging:
			err, done = cl.SplitTablet(ctx, soakTable, fmt.Sprintf("s%06d", rnd.Intn(1_000_000))), &l.splits
		case k == 0:
			err, done = cl.Compact(ctx, soakTable, rnd.Intn(2) == 0), &l.compacts
		default:
			_, err = cl.Checkpoint(ctx, c.TServerAddr(rnd.Intn(c.NumTServers())))
			done = &l.ckpts
		}
		cancel()
		if err != nil {
			l.adminErrs.Add(1)
		} else if done != nil {
			done.Add(1)
		}
	}
}

// soakChaos runs faults one after another until deadline, cycling through
// the four kinds in a shuffled order: SIGKILL a tserver and restart it;
// SIGSTOP one until the master declared it dead, then SIGCONT it; SIGKILL
// the master leader and restart it; SIGSTOP the leader until another
// leads, then SIGCONT it. After each fault it waits until every tserver
// is live again, then rests 1 to 3 s. It returns the first problem.
func soakChaos(c *cluster.Cluster, cl *client.Client, l *soakLedger, rnd *rand.Rand, deadline time.Time, logf func(string, ...any)) error {
	kinds := []string{"kill tserver", "stop tserver", "kill leader", "stop leader"}
	for i := 0; i < 10_000 && time.Now().Before(deadline); i++ {
		if i%len(kinds) == 0 {
			rnd.Shuffle(len(kinds), func(a, b int) { kinds[a], kinds[b] = kinds[b], kinds[a] })
		}
		kind := kinds[i%len(kinds)]
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		what, err := soakFault(ctx, c, cl, l, rnd, kind)
		if err == nil {
			err = soakAllLive(ctx, c, cl, time.Now())
		}
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		logf("chaos: %s; every tserver live again %v after it began", what, time.Since(began).Round(time.Millisecond))
		rest := time.Duration(1000+rnd.Intn(2000)) * time.Millisecond
		time.Sleep(min(rest, max(time.Until(deadline), 0)))
	}
	return nil
}

func soakFault(ctx context.Context, c *cluster.Cluster, cl *client.Client, l *soakLedger, rnd *rand.Rand, kind string) (string, error) {
	i, hold := rnd.Intn(c.NumTServers()), time.Duration(rnd.Intn(1000))*time.Millisecond
	name, kills, stops := "tserver", &l.tsKills, &l.tsStops
	kill, restart, pause, resume := c.KillTServer, c.RestartTServer, c.PauseTServer, c.ResumeTServer
	until, gone := "declared dead", func() error { // the master declared it dead: it was fenced
		addr := c.TServerAddr(i)
		return wait.Until(ctx, func() error {
			list, err := cl.TServers(ctx)
			for _, s := range list {
				if s.Address == addr && !s.Live {
					l.fenced.Add(1)
					return nil
				}
			}
			return errors.Join(err, fmt.Errorf("%s still live", addr))
		})
	}
	if strings.HasSuffix(kind, "leader") {
		leader, err := c.Leader(ctx)
		if err != nil {
			return kind, err
		}
		i, hold, name, kills, stops = leader, hold+500*time.Millisecond, "master leader", &l.mKills, &l.mStops
		kill, restart, pause, resume = c.KillMaster, c.RestartMaster, c.PauseMaster, c.ResumeMaster
		until, gone = "another leads", func() error {
			_, err := c.Leader(ctx) // skips the paused one
			return err
		}
	}
	if strings.HasPrefix(kind, "kill") {
		what := fmt.Sprintf("SIGKILL %s %d, restart after %v", name, i, hold)
		if err := kill(i); err != nil {
			return what, err
		}
		kills.Add(1)
		time.Sleep(hold)
		return what, restart(i)
	}
	what := fmt.Sprintf("SIGSTOP %s %d until %s, SIGCONT %v later", name, i, until, hold)
	if err := pause(i); err != nil {
		return what, err
	}
	stops.Add(1)
	err := gone()
	if err == nil {
		time.Sleep(hold)
	}
	return what, errors.Join(err, resume(i))
}

// soakAllLive waits until the master lists every tserver live with a
// heartbeat after since (a restarted one has registered again).
func soakAllLive(ctx context.Context, c *cluster.Cluster, cl *client.Client, since time.Time) error {
	return wait.Until(ctx, func() error {
		list, err := cl.TServers(ctx)
		if err != nil {
			return err
		}
		live := map[string]bool{}
		for _, s := range list {
			live[s.Address] = live[s.Address] || s.Live && s.LastHeartbeat.After(since)
		}
		for i := 0; i < c.NumTServers(); i++ {
			if !live[c.TServerAddr(i)] {
				return fmt.Errorf("tserver %d (%s) not live", i, c.TServerAddr(i))
			}
		}
		return nil
	})
}

// soakHealthy waits until a leader answers, every tserver is live and
// every tablet serves, and checks that the tablets tile the key space. A
// tablet that does not serve within a minute is an error, not fatal:
// soakVerify then tells which rows it holds and why it does not open.
func soakHealthy(t *testing.T, ctx context.Context, c *cluster.Cluster, cl *client.Client, since time.Time) {
	t.Helper()
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.Leader(wctx); err != nil {
		t.Fatal(err)
	}
	if err := soakAllLive(wctx, c, cl, since); err != nil {
		t.Fatalf("waiting for every tserver to be live: %v\n%s", err, soakExits(c))
	}
	if err := c.WaitServing(wctx, soakTable); err != nil {
		t.Errorf("%v", err)
	}
	tablets, err := cl.Tablets(ctx, soakTable)
	if err != nil {
		t.Fatal(err)
	}
	mgCheckTiling(t, tablets)
	t.Logf("healthy after %v: %d tablets", time.Since(began).Round(time.Millisecond), len(tablets))
}

// soakVerify reads the table tablet by tablet and checks it against the
// ledger: every acknowledged row with its value, no deleted row, unknown
// rows with their value or absent, nothing else, each row once and in
// order. The acknowledged rows of a tablet that cannot be read count as
// lost. It returns the number of rows checked.
func soakVerify(t *testing.T, ctx context.Context, c *cluster.Cluster, cl *client.Client, tbl *client.Table, l *soakLedger, phase string) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	tablets, err := cl.Tablets(ctx, soakTable)
	if err != nil {
		t.Fatalf("%s: %v", phase, err)
	}
	got := map[string]string{}
	var bad []string
	var unreadable []client.TabletInfo
	last := ""
	for _, tb := range tablets {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := tbl.Scan(sctx, tb.StartRow, tb.EndRow, func(r client.Row) bool {
			if _, dup := got[r.Key]; dup || r.Key <= last && last != "" {
				bad = append(bad, fmt.Sprintf("%s read twice or out of order (after %s)", r.Key, last))
			}
			last = r.Key
			v, _ := r.Value("cf", "q")
			got[r.Key] = string(v)
			if len(r.Cells) != 1 {
				bad = append(bad, fmt.Sprintf("%s has %d cells, want 1", r.Key, len(r.Cells)))
			}
			return true
		})
		cancel()
		if err != nil {
			unreadable = append(unreadable, tb)
			bad = append(bad, fmt.Sprintf("UNREADABLE tablet %s [%q, %q) on %s: %v", tb.ID, tb.StartRow, tb.EndRow, tb.TServer, err))
		}
	}
	in := func(k string) string {
		for _, tb := range unreadable {
			if tb.StartRow <= k && (tb.EndRow == "" || k < tb.EndRow) {
				return tb.ID
			}
		}
		return ""
	}
	var lost []string
	unreadableRows := map[string]int{} // tablet → acknowledged rows in it
	for k, r := range l.rows {
		v, ok := got[k]
		switch {
		case r.state == soakAcked && !ok && in(k) != "":
			unreadableRows[in(k)]++
		case r.state == soakAcked && !ok:
			lost = append(lost, k)
			bad = append(bad, fmt.Sprintf("LOST: %s acknowledged at %s", k, r.at.Format("15:04:05.000")))
		case r.state == soakDeleted && ok:
			lost = append(lost, k)
			bad = append(bad, fmt.Sprintf("UNDELETED: %s deleted at %s reads back %.20q", k, r.at.Format("15:04:05.000"), v))
		case ok && v != soakValue(r.val) && r.state != soakDeleted:
			bad = append(bad, fmt.Sprintf("WRONG: %s (%s) reads %.30q, written %.30q", k, soakStateNames[r.state], v, soakValue(r.val)))
		}
	}
	for k := range got {
		if l.rows[k] == nil {
			bad = append(bad, fmt.Sprintf("%s was never written", k))
		}
	}
	for id, n := range unreadableRows {
		bad = append(bad, fmt.Sprintf("LOST: %d acknowledged rows of unreadable tablet %s", n, id))
	}
	// The same rows by point reads: another read path, and the report.
	for _, k := range lost[:min(len(lost), 20)] {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := tbl.Get(gctx, k)
		cancel()
		bad = append(bad, fmt.Sprintf("get %s: %d cells, err %v", k, len(r.Cells), err))
	}
	n := map[soakState]int{}
	for _, r := range l.rows {
		n[r.state]++
	}
	t.Logf("%s: %d rows checked (%d acknowledged, %d deleted, %d writes and %d deletes of unknown outcome), %d rows read",
		phase, len(l.rows), n[soakAcked], n[soakDeleted], n[soakWriteUnknown], n[soakDeleteUnknown], len(got))
	if n[soakAcked] == 0 || n[soakDeleted] == 0 {
		bad = append(bad, "nothing to check: no write or no delete was acknowledged")
	}
	if len(bad) > 0 {
		lostRows := 0
		sort.Strings(bad)
		if len(bad) > 60 {
			bad = append(bad[:60], fmt.Sprintf("... and %d more", len(bad)-60))
		}
		for _, n := range unreadableRows {
			lostRows += n
		}
		t.Errorf("%s: %d rows lost or undeleted, %d problems:\n%s", phase, lostRows+len(lost), len(bad), strings.Join(bad, "\n"))
		t.Logf("what the logs say of it:\n%s", soakLogLines(c, soakRelated(c, unreadable), 60))
	}
	return len(l.rows)
}

// soakRelated matches the log lines of interest after a loss: those that
// name an unreadable tablet or a missing block of one, and the tservers'
// and masters' own warnings and errors.
func soakRelated(c *cluster.Cluster, unreadable []client.TabletInfo) func(string) bool {
	var terms []string
	for _, tb := range unreadable {
		terms = append(terms, tb.ID)
	}
	soakLogScan(c, func(_, line string) {
		for _, id := range terms[:len(unreadable)] {
			if _, block, ok := strings.Cut(line, "block not found: "); ok && strings.Contains(line, id) && len(block) >= 16 {
				terms = append(terms, block[:16]) // the block ID; the message goes on with where it was looked for
			}
		}
	})
	return func(s string) bool {
		for _, term := range terms {
			if strings.Contains(s, term) {
				return true
			}
		}
		return (strings.Contains(s, "level=WARN") || strings.Contains(s, "level=ERROR")) &&
			!strings.Contains(s, "component=raft") && !strings.Contains(s, "heartbeat failed") && !strings.Contains(s, "plaintext")
	}
}

// soakLogScan calls fn with each line of every process log.
func soakLogScan(c *cluster.Cluster, fn func(file, line string)) {
	logs, _ := filepath.Glob(filepath.Join(c.Dir(), "*.log"))
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			fn(filepath.Base(path), line)
		}
	}
}

// soakLogLines returns the last n lines of the process logs that match,
// each once: a line repeated but for its time is shown at its first time.
func soakLogLines(c *cluster.Cluster, match func(string) bool, n int) string {
	var out []string
	seen := map[string]bool{}
	soakLogScan(c, func(file, line string) {
		_, rest, _ := strings.Cut(line, " ")
		if match(line) && !seen[file+rest] {
			seen[file+rest] = true
			out = append(out, file+": "+line)
		}
	})
	return strings.Join(out[max(len(out)-n, 0):], "\n")
}

// soakExits lists the exits of processes the test did not kill.
func soakExits(c *cluster.Cluster) string {
	return soakLogLines(c, func(s string) bool {
		return strings.HasPrefix(s, "=== ") && strings.Contains(s, " exit ") && !strings.HasSuffix(s, "signal: killed")
	}, 20)
}

// soakCount counts the log lines holding msg (and, if set, also).
func soakCount(c *cluster.Cluster, msg, also string) int {
	n := 0
	soakLogScan(c, func(_, line string) {
		if strings.Contains(line, `msg="`+msg+`"`) && strings.Contains(line, also) {
			n++
		}
	})
	return n
}

// TestSoakNoLostWrites runs three masters and three tservers as processes
// with short leases and frequent background work (checkpoints,
// compactions, automatic and requested splits and merges) while writers
// write and delete rows and faults hit the processes: SIGKILL and SIGSTOP
// past the lease of tservers, SIGKILL and SIGSTOP past the election of the
// master leader. Then every acknowledged write reads back and no
// acknowledged delete is undone, and again after every tserver was
// SIGKILLed and restarted at once (so a write held only in memory while
// the metadata lost its files is caught). -soak.duration sets how long
// the chaos runs, -soak.seed replays the choices.
func TestSoakNoLostWrites(t *testing.T) {
	skipShort(t, "chaos soak (SIGKILL and SIGSTOP)")
	seed := *soakSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (-soak.seed %d replays the choices), chaos for %v", seed, seed, *soakDuration)
	rnd := rand.New(rand.NewSource(seed))
	began := time.Now()
	c, cl := startFailoverClusterWith(t, cluster.Options{Masters: 3, Flags: soakTServerFlags, MasterFlags: soakMasterFlags})
	t.Cleanup(func() {
		if t.Failed() && *soakLogs != "" {
			cluster.CopyLogs(t, c.Dir(), *soakLogs)
			t.Logf("logs kept in %s", *soakLogs)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), *soakDuration+4*time.Minute)
	defer cancel()
	tbl := createSpec(t, ctx, c, cl, client.TableSpec{Name: soakTable, Families: []client.FamilySpec{{Name: "cf", MaxVersions: 1}},
		SplitKeys: []string{"s125000", "s250000", "s375000", "s500000", "s625000", "s750000", "s875000"}})

	l := &soakLedger{rows: map[string]*soakRow{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < soakWriters; w++ {
		wrnd := rand.New(rand.NewSource(rnd.Int63()))
		wg.Add(1)
		go func() { defer wg.Done(); soakWriter(tbl, l, wrnd, w, stop) }()
	}
	stopAdmin := make(chan struct{})
	var awg sync.WaitGroup
	for _, merging := range []bool{true, false} {
		arnd := rand.New(rand.NewSource(rnd.Int63()))
		awg.Add(1)
		go func() { defer awg.Done(); soakAdmin(c, cl, l, arnd, merging, stopAdmin) }()
	}
	time.Sleep(min(2*time.Second, *soakDuration/10)) // some data before the first fault
	chaosErr := soakChaos(c, cl, l, rand.New(rand.NewSource(rnd.Int63())), time.Now().Add(*soakDuration), t.Logf)
	close(stopAdmin)
	awg.Wait()
	close(stop)
	wg.Wait()
	if chaosErr != nil {
		t.Fatalf("chaos: %v\nexits the test did not cause:\n%s", chaosErr, soakExits(c))
	}
	chaosEnd, checked := time.Now(), 0
	defer func() {
		t.Logf("figures: %d writes and %d deletes acknowledged, %d writes and %d deletes of unknown outcome (errors); "+
			"requested and done: %d merges, %d splits, %d compactions, %d checkpoints (%d requests failed); "+
			"in the logs: %d merges and %d splits committed, %d checkpoints, %d merging and %d major compactions; "+
			"faults: %d tserver SIGKILLs, %d tserver SIGSTOPs (%d seen declared dead), %d leader SIGKILLs, %d leader SIGSTOPs; "+
			"%d row checks; start and chaos %v, whole test %v",
			l.writes, l.deletes, l.wErrs, l.dErrs,
			l.merges.Load(), l.splits.Load(), l.compacts.Load(), l.ckpts.Load(), l.adminErrs.Load(),
			soakCount(c, "tablets merged", "master="), soakCount(c, "tablet split", "parent="), soakCount(c, "checkpoint done", ""),
			soakCount(c, "compaction done", "major=false"), soakCount(c, "compaction done", "major=true"),
			l.tsKills.Load(), l.tsStops.Load(), l.fenced.Load(), l.mKills.Load(), l.mStops.Load(),
			checked, chaosEnd.Sub(began).Round(time.Second), time.Since(began).Round(time.Second))
	}()

	soakHealthy(t, ctx, c, cl, chaosEnd)
	checked += soakVerify(t, ctx, c, cl, tbl, l, "after the chaos")
	if t.Failed() {
		t.FailNow()
	}

	for i := 0; i < c.NumTServers(); i++ {
		if err := c.KillTServer(i); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	for i := 0; i < c.NumTServers(); i++ {
		if err := c.RestartTServer(i); err != nil {
			t.Fatal(err)
		}
	}
	soakHealthy(t, ctx, c, cl, killed)
	checked += soakVerify(t, ctx, c, cl, tbl, l, "after SIGKILL and restart of every tserver")
	if s := soakExits(c); s != "" {
		t.Errorf("processes exited without the test killing them:\n%s", s)
	}
}
