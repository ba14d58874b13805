package wal

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

// The crash test runs this test binary again as a child (env crashChildEnv
// names the root). The child appends from many goroutines and rolls, and
// prints "ack <seq> <round> <writer> <j>" after each acknowledged append;
// odd writers append with AppendBatch, 1 to 5 records at a time;
// the parent SIGKILLs it at a random moment.
const (
	crashChildEnv = "BIGHIVE_WAL_CRASH_ROOT"
	crashRoundEnv = "BIGHIVE_WAL_CRASH_ROUND"
	// crashRecycleEnv makes the child collect its log as a tserver does
	// (DeleteBefore after each roll, keeping the last files), so that it
	// writes into recycled files; it prints "recycling" once it does.
	crashRecycleEnv = "BIGHIVE_WAL_CRASH_RECYCLE"
	crashWriters    = 16
)

func crashOptions(root string) Options {
	return Options{Root: root, Prefix: testPrefix, FileSize: 128 << 10, MaxBatchBytes: 8 << 10}
}

// crashMutation is the record (round, writer, j) appends; its row names it,
// so a replayed record can be checked against what was appended. uniform
// records all have frames of one size, so that the frames of a recycled
// file line up with those of its previous life: its data then ends right
// before a whole stale frame with a good checksum.
func crashMutation(round, w, j int, uniform bool) (string, *mutation.RowMutation) {
	r := rand.New(rand.NewPCG(uint64(round)<<32|uint64(w), uint64(j)))
	v := make([]byte, 1+r.IntN(1500))
	row := fmt.Appendf(nil, "r%d-w%d-j%d", round, w, j)
	if uniform {
		v = make([]byte, 1000)
		row = fmt.Appendf(nil, "r%d-w%02d-j%09d", round, w, j)
	}
	for i := range v {
		v[i] = byte(r.Uint32())
	}
	return fmt.Sprintf("tablet-%d", w%4), &mutation.RowMutation{
		Row: row,
		Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: 1 << 40, Value: v}},
	}
}

func TestCrashChild(t *testing.T) {
	root := os.Getenv(crashChildEnv)
	if root == "" {
		t.Skip("only run as the crash test's child")
	}
	round, _ := strconv.Atoi(os.Getenv(crashRoundEnv))
	l, err := Open(context.Background(), crashOptions(root))
	if err != nil {
		fmt.Printf("open-error %v\n", err)
		os.Exit(3)
	}
	fmt.Println("ready")
	recycle := os.Getenv(crashRecycleEnv) != ""
	var out sync.Mutex
	for w := 0; w < crashWriters; w++ {
		go func() {
			if w%2 == 1 {
				for j := 0; ; {
					var tablet string
					var ms []*mutation.RowMutation
					for k := 0; k < 1+j%5; k++ {
						var m *mutation.RowMutation
						tablet, m = crashMutation(round, w, j+k, recycle)
						ms = append(ms, m)
					}
					seqs, errs := l.AppendBatch(context.Background(), tablet, ms)
					out.Lock()
					for k, err := range errs {
						if err != nil {
							fmt.Printf("append-error %v\n", err)
							os.Exit(4)
						}
						fmt.Printf("ack %d %d %d %d\n", seqs[k], round, w, j+k)
					}
					out.Unlock()
					j += len(ms)
				}
			}
			for j := 0; ; j++ {
				tablet, m := crashMutation(round, w, j, recycle)
				seq, err := l.Append(context.Background(), tablet, m)
				if err != nil {
					fmt.Printf("append-error %v\n", err)
					os.Exit(4)
				}
				out.Lock()
				fmt.Printf("ack %d %d %d %d\n", seq, round, w, j)
				out.Unlock()
			}
		}()
	}
	go func() {
		var positions []Position
		said := false
		for {
			time.Sleep(15 * time.Millisecond)
			p, err := l.Roll()
			if err != nil {
				os.Exit(5)
			}
			if !recycle {
				continue
			}
			positions = append(positions, p)
			if len(positions) > 3 {
				if _, err := l.DeleteBefore(positions[len(positions)-3]); err != nil {
					fmt.Printf("gc-error %v\n", err)
					os.Exit(7)
				}
			}
			if !said && l.Stats().Recycled > 0 {
				said = true
				out.Lock()
				fmt.Println("recycling")
				out.Unlock()
			}
		}
	}()
	time.Sleep(20 * time.Second) // the parent kills us long before
	os.Exit(6)
}

type crashAck struct{ round, w, j int }

func TestCrashSIGKILL(t *testing.T) { crashRounds(t, false) }

// TestCrashSIGKILLRecycled kills the child while it writes into recycled
// files (their bytes past the data are the previous life's frames):
// replay still sees exactly the records appended, every acknowledged one
// of the files not collected, and no stale record.
func TestCrashSIGKILLRecycled(t *testing.T) { crashRounds(t, true) }

func crashRounds(t *testing.T, recycle bool) {
	if testing.Short() {
		t.Skip("SIGKILLed child processes appending to the log: runs without -short")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BIGHIVE_WAL_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with BIGHIVE_WAL_CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	acked := map[uint64]crashAck{}
	const rounds = 4
	killedInRecycled := 0
	for round := 0; round < rounds; round++ {
		sawRecycling := false
		cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+root, crashRoundEnv+"="+strconv.Itoa(round))
		if recycle {
			cmd.Env = append(cmd.Env, crashRecycleEnv+"=1")
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Kill at a random moment after the child is ready.
		delay := time.Duration(30+rng.IntN(250)) * time.Millisecond
		var kill <-chan time.Time
		n := 0
		for line := range lines {
			switch {
			case line == "ready" && !recycle, line == "recycling":
				sawRecycling = line == "recycling"
				kill = time.After(delay)
			case strings.HasPrefix(line, "ack "):
				var seq uint64
				var a crashAck
				if _, err := fmt.Sscanf(line, "ack %d %d %d %d", &seq, &a.round, &a.w, &a.j); err != nil {
					continue // a line cut by the kill
				}
				if prev, dup := acked[seq]; dup {
					t.Fatalf("round %d: seq %d acknowledged twice (%v and %v)", round, seq, prev, a)
				}
				acked[seq] = a
				n++
			case strings.HasPrefix(line, "open-error") || strings.HasPrefix(line, "append-error") || strings.HasPrefix(line, "gc-error"):
				t.Fatalf("round %d: child: %s", round, line)
			}
			if kill != nil {
				select {
				case <-kill:
					cmd.Process.Signal(syscall.SIGKILL)
					kill = nil
				default:
				}
			}
		}
		cmd.Process.Signal(syscall.SIGKILL) // in case output stopped before the timer
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: child ended without SIGKILL: %v\n%s", round, err, stderr.String())
		}
		t.Logf("round %d: killed after %v, %d acks", round, delay, n)
		if recycle {
			if !sawRecycling {
				t.Fatalf("round %d: the child never wrote into a recycled file", round)
			}
			if newestRecycled(t, root) {
				killedInRecycled++
			}
		}
		checkCrashLog(t, root, acked, round, recycle)
	}
	if recycle {
		t.Logf("%d of %d rounds killed while the newest file was a recycled one", killedInRecycled, rounds)
		if killedInRecycled == 0 {
			t.Fatal("no round was killed while writing a recycled file")
		}
	}
	// A last clean Open repairs the torn tail, and nothing is lost.
	l := openLog(t, crashOptions(root))
	closeLog(t, l)
	_, rep := checkCrashLog(t, root, acked, rounds, recycle)
	if rep.Torn() {
		t.Fatalf("torn tail after repair: %+v", rep)
	}
}

// newestRecycled reports whether the newest log file with a header is a
// recycled one.
func newestRecycled(t *testing.T, root string) bool {
	t.Helper()
	files, err := Files(vfs.Default, root, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(files) - 1; i >= 0; i-- {
		h, _, st, _ := decodeHeader(mustRead(t, FilePath(root, files[i])))
		if st == headerOK {
			return h.Flags&flagRecycled != 0
		}
	}
	return false
}

// checkCrashLog replays the whole log: sequence numbers run on from the
// first file's (1 unless files were collected), every record is one that
// was appended, byte-identical and once, and every acknowledged one of
// the files left is there.
func checkCrashLog(t *testing.T, root string, acked map[uint64]crashAck, round int, recycled bool) (int, ReplayReport) {
	t.Helper()
	var n int
	var first, next uint64
	files, err := Files(vfs.Default, root, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		h, _, st, _ := decodeHeader(mustRead(t, FilePath(root, p)))
		if st == headerOK {
			first = h.FirstSeq
			break
		}
	}
	next = first
	seen := map[crashAck]uint64{}
	rep, err := Replay(context.Background(), vfs.Default, root, Position{Prefix: testPrefix}, func(r *Record) error {
		if r.Seq != next {
			return fmt.Errorf("seq %d, want %d", r.Seq, next)
		}
		next++
		var a crashAck
		if _, err := fmt.Sscanf(string(r.Mutation.Row), "r%d-w%d-j%d", &a.round, &a.w, &a.j); err != nil {
			return fmt.Errorf("seq %d: row %q was never appended", r.Seq, r.Mutation.Row)
		}
		if s, dup := seen[a]; dup {
			return fmt.Errorf("seq %d: %v replayed again (first at seq %d)", r.Seq, a, s)
		}
		seen[a] = r.Seq
		tablet, m := crashMutation(a.round, a.w, a.j, recycled)
		if r.TabletID != tablet || !bytes.Equal(r.Mutation.Append(nil), m.Append(nil)) {
			return fmt.Errorf("seq %d: record differs from what was appended", r.Seq)
		}
		if want, ok := acked[r.Seq]; ok && want != a {
			return fmt.Errorf("seq %d: replayed %v, acknowledged %v", r.Seq, a, want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("after round %d: replay: %v", round, err)
	}
	if first > 1 && !recycled {
		t.Fatalf("after round %d: the log starts at seq %d, but nothing was collected", round, first)
	}
	for seq := range acked {
		if seq >= next && seq >= first {
			t.Fatalf("after round %d: acknowledged seq %d lost (log ends at %d)", round, seq, next-1)
		}
	}
	return n, rep
}
