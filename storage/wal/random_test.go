package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

// TestRecycleRandomized runs one log through a random mix of appends (some
// larger than a flush), rolls and collections with recycling, and at
// random moments checks a copy of its files in three states:
//
//   - as written: replay hands over exactly the records appended since the
//     first file left, byte-identical, and nothing of a recycled file's
//     previous life;
//   - torn: the last flush (the last record) with a random range of it put back to what the file held before the flush
//     (a recycled file's old frames, or zeros). Replay hands over every
//     record before it, and the last one when the range missed it, without
//     error; Open repairs it;
//   - corrupt: one byte flipped in a record that live records follow
//     beyond the last flush's window. Replay reports a *CorruptionError at
//     that file and offset.
//
// Set BIGHIVE_WAL_RANDOM_SEED to rerun a seed.
func TestRecycleRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BIGHIVE_WAL_RANDOM_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with BIGHIVE_WAL_RANDOM_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	root := t.TempDir()
	opts := testOptions(root)
	opts.MaxBatchBytes = 4 << 10
	opts.FileSize = int64(32+rng.IntN(32)) << 10
	opts.RecycleFiles = 1 + rng.IntN(4)
	if rng.IntN(2) == 0 {
		opts.Prealloc = PreallocZero
	}
	t.Logf("FileSize %d, RecycleFiles %d, Prealloc %d", opts.FileSize, opts.RecycleFiles, opts.Prealloc)
	l := openLog(t, opts)
	defer func() { l.Close() }()
	maxFlush := int64(opts.MaxBatchBytes) + l.headerSize
	// Uniform records have frames of one size, so a recycled file's new
	// frames line up with its old ones: the data then ends right before
	// a whole stale frame with a good checksum.
	uniform := rng.IntN(2) == 0
	t.Logf("uniform records %v", uniform)

	var muts []*mutation.RowMutation // by seq - 1
	positions := []Position{l.Position()}
	const steps = 300
	var torn, corrupt int
	for step := 0; step < steps; step++ {
		switch r := rng.IntN(100); {
		case r < 6:
			p, err := l.Roll()
			if err != nil {
				t.Fatal(err)
			}
			positions = append(positions, p)
			continue
		case r < 12:
			if _, err := l.DeleteBefore(positions[rng.IntN(len(positions))]); err != nil {
				t.Fatal(err)
			}
			continue
		}
		size := 1 + rng.IntN(1500)
		if rng.IntN(10) == 0 {
			size = 5000 + rng.IntN(7000) // larger than a flush: written alone
		}
		if uniform {
			size = 700
		}
		m := &mutation.RowMutation{Row: fmt.Appendf(nil, "row-%08d", len(muts)), Ops: []mutation.Op{
			{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: 1 << 40, Value: randBytes(rng, size)}}}
		pos := l.Position()
		path := FilePath(root, pos)
		pre, _ := os.ReadFile(path)
		seq, err := l.Append(context.Background(), "t", m)
		if err != nil {
			t.Fatal(err)
		}
		muts = append(muts, m)
		if seq != uint64(len(muts)) {
			t.Fatalf("step %d: seq %d, want %d", step, seq, len(muts))
		}
		if rng.IntN(8) != 0 {
			continue
		}
		post, err := os.ReadFile(path)
		if err != nil || pre == nil || l.Position() != pos {
			continue // the record started a file: no state before the flush to tear back to
		}
		state := copyLog(t, root)
		checkRandomReplay(t, step, state, muts, len(muts), false)

		// Torn: a range of the last flush back to its old bytes.
		rep, err := ReplayFile(vfs.Default, path, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		recOff, recEnd := lastRecordOffset(t, post, path), rep.End
		lo := recOff + rng.Int64N(recEnd-recOff)
		hi := lo + 1 + rng.Int64N(recEnd-lo)
		tb := bytes.Clone(post)
		for k := lo; k < hi; k++ {
			if k < int64(len(pre)) {
				tb[k] = pre[k]
			} else {
				tb[k] = 0
			}
		}
		want := len(muts)
		if !bytes.Equal(tb[recOff:recEnd], post[recOff:recEnd]) {
			want--
		}
		if err := os.WriteFile(FilePath(state, pos), tb, 0o644); err != nil {
			t.Fatal(err)
		}
		if checkRandomReplay(t, step, state, muts, want, true) > 0 {
			torn++
		}
		sopts := opts
		sopts.Root, sopts.Logger = state, slog.New(slog.DiscardHandler)
		sl, err := Open(context.Background(), sopts)
		if err != nil {
			t.Fatalf("step %d: Open of the torn copy: %v", step, err)
		}
		if err := sl.Close(); err != nil {
			t.Fatal(err)
		}
		checkRandomReplay(t, step, state, muts, want, false) // repaired: not torn

		// Corrupt: a byte of a record that live records follow beyond the
		// window, in any file of the original state.
		state = copyLog(t, root)
		files, _ := Files(vfs.Default, state, testPrefix)
		type target struct {
			path string
			off  int64
			end  int64
		}
		var targets []target
		for i, p := range files {
			fp := FilePath(state, p)
			data := mustRead(t, fp)
			var offs []int64
			fr, err := ReplayFile(vfs.Default, fp, func(r *Record) error { offs = append(offs, r.Offset); return nil })
			if err != nil || len(offs) < 2 {
				continue
			}
			offs = append(offs, fr.End)
			for k := 0; k+2 < len(offs); k++ { // never the last record of a file
				if i == len(files)-1 && offs[k]+maxFlush+int64(frameLen(data[offs[k]:], frameHeaderLen)) >= offs[len(offs)-2] {
					continue // within the last flush's reach of the newest file's last record
				}
				targets = append(targets, target{fp, offs[k], offs[k+1]})
			}
		}
		if len(targets) == 0 {
			continue
		}
		tg := targets[rng.IntN(len(targets))]
		data := mustRead(t, tg.path)
		data[tg.off+rng.Int64N(tg.end-tg.off)] ^= byte(1 + rng.IntN(255))
		if err := os.WriteFile(tg.path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Replay(context.Background(), vfs.Default, state, Position{Prefix: testPrefix}, func(*Record) error { return nil })
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.File != tg.path || ce.Offset != tg.off {
			t.Fatalf("step %d: flipped a byte of the record at %s:%d: replay says %v", step, tg.path, tg.off, err)
		}
		corrupt++
	}
	st := l.Stats()
	t.Logf("%d records, %d files (%d recycled), %d torn-looking and %d corrupt states checked", len(muts), st.Files, st.Recycled, torn, corrupt)
	if st.Recycled == 0 {
		t.Fatal("no file was recycled")
	}
}

// lastRecordOffset is the offset of the last record of the log file at
// path, whose bytes are data.
func lastRecordOffset(t *testing.T, data []byte, path string) int64 {
	t.Helper()
	var last int64 = -1
	if _, err := scanFile(path, data, nil, func(r *Record) error { last = r.Offset; return nil }); err != nil || last < 0 {
		t.Fatalf("%s: no last record (%v)", path, err)
	}
	return last
}

// copyLog copies the log files of the test prefix under root to a new
// root and returns it.
func copyLog(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	files, err := Files(vfs.Default, root, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(PrefixDir(dst, testPrefix), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(FilePath(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(FilePath(dst, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// checkRandomReplay replays the log under root: the records must be those
// of muts (by seq) from the first file's on, up to seq want, in order and
// identical. It returns how many files were torn (torn says whether the
// newest may be).
func checkRandomReplay(t *testing.T, step int, root string, muts []*mutation.RowMutation, want int, torn bool) int {
	t.Helper()
	var got []uint64
	rep, err := Replay(context.Background(), vfs.Default, root, Position{Prefix: testPrefix}, func(r *Record) error {
		if r.Seq == 0 || r.Seq > uint64(len(muts)) || !bytes.Equal(r.Mutation.Append(nil), muts[r.Seq-1].Append(nil)) {
			return fmt.Errorf("seq %d at %s:%d is not the record appended with it", r.Seq, r.File, r.Offset)
		}
		got = append(got, r.Seq)
		return nil
	})
	if err != nil {
		t.Fatalf("step %d: replay: %v", step, err)
	}
	if rep.Torn() && !torn {
		t.Fatalf("step %d: torn log %+v", step, rep.Files)
	}
	if len(got) == 0 {
		// Every record left was in the torn flush: the newest file must
		// start right after want.
		for i := len(rep.Files) - 1; i >= 0; i-- {
			if f := rep.Files[i]; !f.Unused {
				if f.FirstSeq != uint64(want)+1 {
					t.Fatalf("step %d: no record replayed, the newest file starts at seq %d, want %d", step, f.FirstSeq, want+1)
				}
				break
			}
		}
	} else if got[len(got)-1] != uint64(want) {
		t.Fatalf("step %d: replayed seqs %v, want them to end at %d", step, tail(got), want)
	}
	for k := 1; k < len(got); k++ {
		if got[k] != got[k-1]+1 {
			t.Fatalf("step %d: seq %d after %d", step, got[k], got[k-1])
		}
	}
	n := 0
	for _, f := range rep.Files {
		if f.Torn {
			n++
		}
	}
	return n
}

func tail(s []uint64) []uint64 { return s[max(0, len(s)-5):] }

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
