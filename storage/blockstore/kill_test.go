package blockstore

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const killChildEnv = "BLOCKSTORE_KILL_CHILD"

// TestKillChild is the child of TestSIGKILLCrash: it commits transactions
// of blocks whose contents are a function of (id, length) until killed,
// printing "C <id> <len>" after each commit returned, "P <id>" before a
// deletion and "D <id>" after each deletion returned.
func TestKillChild(t *testing.T) {
	spec := os.Getenv(killChildEnv)
	if spec == "" {
		t.Skip("child of TestSIGKILLCrash only")
	}
	parts := strings.SplitN(spec, ":", 3)
	seed, _ := strconv.ParseUint(parts[1], 10, 64)
	dir := parts[2]
	m, _, err := Open(Options{Kind: parts[0], Dirs: []string{dir}, MaxContainerSize: 1 << 20, PreallocateStep: 256 << 10, Logger: quietLogger()})
	if err != nil {
		fmt.Println("E", err)
		os.Exit(1)
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	out := bufio.NewWriter(os.Stdout)
	var live []BlockID
	for {
		tx := m.NewCreationTransaction()
		var bs []WritableBlock
		for range 1 + rng.IntN(6) {
			b, err := m.CreateBlock(CreateBlockOptions{TabletID: "k"})
			if err != nil {
				fmt.Println("E", err)
				os.Exit(1)
			}
			b.Append(payload(b.ID(), rng.IntN(48<<10)))
			b.Finalize()
			tx.AddCreatedBlock(b)
			bs = append(bs, b)
		}
		if err := tx.CommitCreatedBlocks(); err != nil {
			fmt.Println("E", err)
			os.Exit(1)
		}
		for _, b := range bs {
			fmt.Fprintf(out, "C %d %d\n", b.ID(), b.BytesAppended())
			live = append(live, b.ID())
		}
		out.Flush()
		if len(live) > 10 && rng.IntN(3) == 0 {
			dt := m.NewDeletionTransaction()
			for range 3 {
				i := rng.IntN(len(live))
				dt.AddDeletedBlock(live[i])
				// A kill after the commit but before "D" must not make
				// the block count as lost.
				fmt.Fprintf(out, "P %d\n", live[i])
				live = append(live[:i], live[i+1:]...)
			}
			out.Flush()
			del, _ := dt.CommitDeletedBlocks()
			for _, id := range del {
				fmt.Fprintf(out, "D %d\n", id)
			}
			out.Flush()
		}
	}
}

// TestSIGKILLCrash runs a child process writing blocks, kills it with
// SIGKILL at a seeded random moment, reopens the store and verifies every
// committed block, for a few rounds per manager kind.
func TestSIGKILLCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILLed child processes writing blocks: runs without -short")
	}
	forEachKind(t, func(t *testing.T, kind string) {
		dir := t.TempDir()
		committed := map[BlockID]int{} // across rounds: each child reopens the store
		deleted := map[BlockID]bool{}
		pending := map[BlockID]bool{} // deletion begun: may be gone
		for round := range 3 {
			seed := uint64(time.Now().UnixNano())
			if s := os.Getenv("BLOCKSTORE_KILL_SEED"); s != "" {
				seed, _ = strconv.ParseUint(s, 10, 64)
			}
			seed += uint64(round)
			t.Logf("round %d seed %d (replay with BLOCKSTORE_KILL_SEED)", round, seed-uint64(round))
			rng := rand.New(rand.NewPCG(seed, 9))
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d:%s", killChildEnv, kind, seed, dir))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			started := make(chan struct{})
			var once bool
			go func() {
				defer close(done)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					f := strings.Fields(sc.Text())
					switch {
					case len(f) == 3 && f[0] == "C":
						id, _ := strconv.ParseUint(f[1], 10, 64)
						n, _ := strconv.Atoi(f[2])
						committed[BlockID(id)] = n
						if !once {
							once = true
							close(started)
						}
					case len(f) == 2 && f[0] == "P":
						id, _ := strconv.ParseUint(f[1], 10, 64)
						pending[BlockID(id)] = true
					case len(f) == 2 && f[0] == "D":
						id, _ := strconv.ParseUint(f[1], 10, 64)
						deleted[BlockID(id)] = true
					case len(f) > 0 && f[0] == "E":
						t.Errorf("child: %s", sc.Text())
					}
				}
			}()
			select { // the kill timer starts at the child's first commit
			case <-started:
			case <-done:
			case <-time.After(30 * time.Second):
			}
			time.Sleep(time.Duration(20+rng.IntN(300)) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			cmd.Wait()
			if !once {
				t.Fatalf("round %d: child committed nothing", round)
			}
			m, rep, err := Open(Options{Kind: kind, Dirs: []string{dir}, MaxContainerSize: 1 << 20, Logger: quietLogger()})
			if err != nil {
				t.Fatalf("round %d: reopen: %v\n%v", round, err, rep)
			}
			ids, _ := m.AllBlockIDs()
			present := map[BlockID]bool{}
			for _, id := range ids {
				present[id] = true
				got := readAllBlock(t, m, id)
				if crc32.ChecksumIEEE(got) != crc32.ChecksumIEEE(payload(id, len(got))) {
					t.Errorf("round %d: block %s (%d bytes) corrupt", round, id, len(got))
				}
				if n, ok := committed[id]; ok && n != len(got) {
					t.Errorf("round %d: block %s has %d bytes, committed %d", round, id, len(got), n)
				}
			}
			for id := range committed {
				if !deleted[id] && !pending[id] && !present[id] {
					t.Errorf("round %d: committed block %s missing", round, id)
				}
			}
			t.Logf("round %d: %d committed, %d deleted, %d present; %d findings", round, len(committed), len(deleted), len(ids), len(rep.Findings))
			m.Close()
		}
	})
}
