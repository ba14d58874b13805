package checkpoint_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"bighive/storage/checkpoint"
	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

const (
	killTablets = 8
	killWriters = 8
	killRows    = 12 // rows per writer
)

func killConfig(dir string) nodeConfig {
	return nodeConfig{fs: vfs.Default, root: dir, metaPath: filepath.Join(dir, "meta.db"), tablets: killTablets,
		opts: checkpoint.Options{MemLimit: 256 << 10, MaxTSFiles: 3, MajorEvery: 200 * time.Millisecond,
			CompactionRate: -1, Interval: 5 * time.Millisecond, OrphanEvery: 100 * time.Millisecond, OrphanGrace: time.Second}}
}

// killOp is one logged operation: kind s (set), c (delete column) or r
// (delete row) of row in tablet at ts; a set's value is "v<ts>".
type killOp struct {
	tablet, row string
	kind        byte
	col         string
	ts          int64
}

func (o killOp) String() string {
	return fmt.Sprintf("%s %s %c %s %d", o.tablet, o.row, o.kind, o.col, o.ts)
}

func parseOp(s string) (killOp, bool) {
	f := strings.Fields(s)
	if len(f) != 5 || len(f[2]) != 1 {
		return killOp{}, false
	}
	ts, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		return killOp{}, false
	}
	return killOp{tablet: f[0], row: f[1], kind: f[2][0], col: f[3], ts: ts}, true
}

func (o killOp) mutation() *mutation.RowMutation {
	m := &mutation.RowMutation{Row: []byte(o.row)}
	fam, qual, _ := strings.Cut(o.col, ":")
	switch o.kind {
	case 's':
		m.Ops = []mutation.Op{{Kind: mutation.SetCell, Family: fam, Qualifier: []byte(qual), Timestamp: o.ts, Value: fmt.Appendf(nil, "v%d", o.ts)}}
	case 'c':
		m.Ops = []mutation.Op{{Kind: mutation.DeleteColumn, Family: fam, Qualifier: []byte(qual), End: o.ts + 1}}
	default:
		m.Ops = []mutation.Op{{Kind: mutation.DeleteRow, Timestamp: o.ts}}
	}
	return m
}

// TestKillChild is the child process of TestSIGKILLDurability: it writes
// until killed, printing "P <op>" before and "A <op>" after each
// acknowledged write.
func TestKillChild(t *testing.T) {
	dir := os.Getenv("BIGHIVE_CKPT_CHILD_DIR")
	if dir == "" {
		t.Skip("child process of TestSIGKILLDurability")
	}
	round, _ := strconv.Atoi(os.Getenv("BIGHIVE_CKPT_CHILD_ROUND"))
	seed, _ := strconv.ParseUint(os.Getenv("BIGHIVE_CKPT_CHILD_SEED"), 10, 64)
	ctx := context.Background()
	n, err := openNode(ctx, killConfig(dir))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	n.run()
	var wg sync.WaitGroup
	for w := range killWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(round*100+w)))
			ts := int64(round+1) << 40
			for {
				ts++
				r := rnd.IntN(killRows)
				op := killOp{tablet: tabletID((w*killRows + r) % killTablets), row: fmt.Sprintf("w%d-r%02d", w, r), kind: 's',
					col: columns[rnd.IntN(len(columns))][0] + ":" + columns[rnd.IntN(len(columns))][1], ts: ts}
				switch k := rnd.IntN(100); {
				case k < 8:
					op.kind = 'c'
				case k < 11:
					op.kind, op.col = 'r', "-"
				}
				if op.kind == 's' || op.kind == 'c' {
					c := columns[rnd.IntN(len(columns))]
					op.col = c[0] + ":" + c[1]
				}
				os.Stdout.WriteString("P " + op.String() + "\n")
				if err := n.write(ctx, op.tablet, op.mutation()); err != nil {
					fmt.Println("write:", err)
					os.Exit(2)
				}
				os.Stdout.WriteString("A " + op.String() + "\n")
			}
		}()
	}
	wg.Wait()
}

// rowState is the parent's model of one row: the state after the last
// acknowledged op, and an op that was in flight at the kill.
type rowState struct {
	acked   map[string]string
	pending *killOp
}

func applyOp(cols map[string]string, o killOp) map[string]string {
	out := maps.Clone(cols)
	if out == nil {
		out = map[string]string{}
	}
	switch o.kind {
	case 's':
		out[o.col] = fmt.Sprintf("v%d", o.ts)
	case 'c':
		delete(out, o.col)
	default:
		clear(out)
	}
	return out
}

// TestSIGKILLDurability runs a child that writes from many goroutines to
// many tablets with checkpoints, compactions, log GC and orphan passes
// running, SIGKILLs it at a seeded random moment, and after each restart
// checks that every acknowledged write reads back exactly (a write in
// flight at the kill may or may not have happened), that nothing else
// appears, and that the block store holds exactly the referenced blocks,
// a bounded number.
func TestSIGKILLDurability(t *testing.T) {
	if os.Getenv("BIGHIVE_CKPT_CHILD_DIR") != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("SIGKILLed child processes checkpointing: runs without -short")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	rows := map[string]*rowState{} // key tablet/row
	const rounds = 4
	totalAcked := 0
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "BIGHIVE_CKPT_CHILD_DIR="+dir, fmt.Sprintf("BIGHIVE_CKPT_CHILD_ROUND=%d", round),
			fmt.Sprintf("BIGHIVE_CKPT_CHILD_SEED=%d", seed))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The kill comes a random delay after the child's first
		// acknowledged write, not after its start: a child that is slow to
		// start (a loaded machine, -race) is still killed while writing.
		// One that never acknowledges is killed after a minute and fails.
		delay := time.Duration(800+rnd.IntN(1200)) * time.Millisecond
		kill := func() { cmd.Process.Signal(syscall.SIGKILL) }
		stall := time.AfterFunc(time.Minute, kill)
		var timer *time.Timer
		sc := bufio.NewScanner(out)
		acked := 0
		for sc.Scan() {
			line := sc.Text()
			kind, rest, _ := strings.Cut(line, " ")
			op, ok := parseOp(rest)
			if !ok || kind != "P" && kind != "A" {
				if strings.HasPrefix(line, "open:") || strings.HasPrefix(line, "write:") {
					t.Errorf("child: %s", line)
				}
				continue
			}
			key := op.tablet + "/" + op.row
			rs := rows[key]
			if rs == nil {
				rs = &rowState{acked: map[string]string{}}
				rows[key] = rs
			}
			if kind == "P" {
				o := op
				rs.pending = &o
			} else {
				rs.acked = applyOp(rs.acked, op)
				rs.pending = nil
				acked++
				if timer == nil {
					stall.Stop()
					timer = time.AfterFunc(delay, kill)
				}
			}
		}
		cmd.Wait()
		stall.Stop()
		if timer != nil {
			timer.Stop()
		}
		totalAcked += acked
		if acked == 0 {
			t.Fatalf("round %d: no write acknowledged within a minute of the child's start", round)
		}

		n, err := openNode(context.Background(), killConfig(dir))
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		bad := 0
		for key, rs := range rows {
			tab, row, _ := strings.Cut(key, "/")
			got, err := readRow(n.byID[tab], []byte(row))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case maps.Equal(got, rs.acked):
			case rs.pending != nil && maps.Equal(got, applyOp(rs.acked, *rs.pending)):
				rs.acked = got
			default:
				if bad++; bad <= 5 {
					t.Errorf("round %d: %s = %v, want %v (pending %v)", round, key, got, rs.acked, rs.pending)
				}
			}
			rs.pending = nil
		}
		n.checkBlocks(t)
		ids, _ := n.mgr.AllBlockIDs()
		// Each tablet holds at most MaxTSFiles+1 files after a restart (a
		// compaction may have been cut short) of at most 6 blocks (2
		// families × data+index, bloom, footer; row tombstones 2 more).
		if limit := killTablets * 5 * 8; len(ids) > limit {
			t.Errorf("round %d: %d blocks, more than %d", round, len(ids), limit)
		}
		t.Logf("round %d: killed %v after its first acknowledged write, %d acknowledged writes, recovery replayed %d records from %d log files in %v, %d blocks, %d orphans deleted",
			round, delay, acked, n.rep.Records, len(n.rep.Files), n.rep.Duration, len(ids), n.orphans)
		n.close()
		if t.Failed() {
			return
		}
	}
	t.Logf("%d acknowledged writes over %d rounds", totalAcked, rounds)
}
