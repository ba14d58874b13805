package wal

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/storage/vfs"
)

func TestAppendReplayConcurrent(t *testing.T) {
	root := t.TempDir()
	l := openLog(t, testOptions(root))
	const writers, per = 8, 50
	var mu sync.Mutex
	bySeq := map[uint64]int{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := 0; j < per; j++ {
				i := w*per + j
				seq, err := l.Append(context.Background(), tabletOf(i), testMutation(i, 100))
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				bySeq[seq] = i
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	st := l.Stats()
	closeLog(t, l)
	if st.Records != writers*per || st.Syncs < st.Batches || st.Batches == 0 || st.Files != 1 {
		t.Fatalf("stats %+v", st)
	}
	recs, rep := replayAll(t, vfs.Default, root)
	if len(recs) != writers*per || rep.Torn() {
		t.Fatalf("replayed %d records (torn %v), want %d", len(recs), rep.Torn(), writers*per)
	}
	for k := range recs {
		r := &recs[k]
		if r.Seq != uint64(k+1) {
			t.Fatalf("record %d has seq %d", k, r.Seq)
		}
		i, ok := bySeq[r.Seq]
		if !ok {
			t.Fatalf("seq %d replayed but never acknowledged", r.Seq)
		}
		checkRecord(t, r, i, 100)
	}
}

func TestSeqAndTimestampsAcrossRestarts(t *testing.T) {
	root := t.TempDir()
	// The clock jumps backwards between runs: file timestamps must still grow.
	clocks := []time.Time{time.Unix(2000, 0), time.Unix(1000, 0), time.Unix(1000, 0), time.Unix(10, 0)}
	var want uint64 = 1
	for run, c := range clocks {
		opts := testOptions(root)
		opts.Clock = func() time.Time { return c }
		l := openLog(t, opts)
		for _, s := range appendN(t, l, run*10, 10, 50) {
			if s != want {
				t.Fatalf("run %d: seq %d, want %d", run, s, want)
			}
			want++
		}
		if _, err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		appendN(t, l, run*10+10, 1, 50)
		want++
		closeLog(t, l)
	}
	files, err := Files(vfs.Default, root, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2*len(clocks) {
		t.Fatalf("%d files, want %d", len(files), 2*len(clocks))
	}
	for i := 1; i < len(files); i++ {
		if files[i].FileTS <= files[i-1].FileTS {
			t.Fatalf("file timestamps not increasing: %v", files)
		}
	}
	recs, _ := replayAll(t, vfs.Default, root)
	for k := range recs {
		if recs[k].Seq != uint64(k+1) {
			t.Fatalf("record %d has seq %d", k, recs[k].Seq)
		}
	}
	if uint64(len(recs)) != want-1 {
		t.Fatalf("%d records, want %d", len(recs), want-1)
	}
}

// TestRollUnderConcurrentAppends checks that Roll loses and duplicates
// nothing, and that every record appended after Roll returned lies in the
// rolled-to file or later, every record acknowledged before Roll in an
// earlier file.
func TestRollUnderConcurrentAppends(t *testing.T) {
	root := t.TempDir()
	opts := testOptions(root)
	opts.Prealloc = PreallocZero
	opts.FileSize = 64 << 10
	l := openLog(t, opts)
	type ack struct {
		seq          uint64
		i            int
		rollsBefore  int64 // rolls completed before Append started
		rollsStarted int64 // rolls started before Append returned
	}
	var rollsDone, rollsStarted atomic.Int64
	var positions sync.Map // roll index (1-based) -> Position
	var mu sync.Mutex
	var acks []ack
	var next atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := int(next.Add(1))
				before := rollsDone.Load()
				seq, err := l.Append(context.Background(), tabletOf(i), testMutation(i, 200))
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				started := rollsStarted.Load()
				mu.Lock()
				acks = append(acks, ack{seq, i, before, started})
				mu.Unlock()
			}
		}()
	}
	for k := 1; k <= 20; k++ {
		time.Sleep(2 * time.Millisecond)
		rollsStarted.Add(1)
		pos, err := l.Roll()
		if err != nil {
			t.Fatal(err)
		}
		positions.Store(int64(k), pos)
		rollsDone.Add(1)
	}
	close(stop)
	wg.Wait()
	closeLog(t, l)

	recs, rep := replayAll(t, vfs.Default, root)
	if len(recs) != len(acks) || rep.Torn() {
		t.Fatalf("replayed %d records (torn %v), acknowledged %d", len(recs), rep.Torn(), len(acks))
	}
	fileOf := map[uint64]int64{}
	for k := range recs {
		if recs[k].Seq != uint64(k+1) {
			t.Fatalf("record %d has seq %d", k, recs[k].Seq)
		}
		fileOf[recs[k].Seq] = recs[k].File.FileTS
	}
	pos := func(k int64) int64 { p, _ := positions.Load(k); return p.(Position).FileTS }
	for _, a := range acks {
		r := &recs[a.seq-1]
		checkRecord(t, r, a.i, 200)
		if a.rollsBefore > 0 && fileOf[a.seq] < pos(a.rollsBefore) {
			t.Fatalf("seq %d appended after roll %d is in file %d, before %d", a.seq, a.rollsBefore, fileOf[a.seq], pos(a.rollsBefore))
		}
		if k := a.rollsStarted + 1; k <= 20 && fileOf[a.seq] >= pos(k) {
			t.Fatalf("seq %d acknowledged before roll %d is in file %d, not before %d", a.seq, k, fileOf[a.seq], pos(k))
		}
	}
	// A Roll with no Append since the previous one returns its position.
	distinct := map[int64]bool{}
	for k := int64(1); k <= 20; k++ {
		distinct[pos(k)] = true
	}
	if len(rep.Files) < len(distinct)+1 || len(distinct) < 2 {
		t.Fatalf("%d files after rolls to %d distinct positions", len(rep.Files), len(distinct))
	}
}

func TestRollTwiceWithoutAppendReturnsSamePosition(t *testing.T) {
	l := openLog(t, testOptions(t.TempDir()))
	defer closeLog(t, l)
	p1, err := l.Roll()
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := l.Roll()
	if p1 != p2 || l.Position() != p1 {
		t.Fatalf("positions %v %v %v", p1, p2, l.Position())
	}
	appendN(t, l, 0, 1, 10)
	p3, _ := l.Roll()
	if p3.FileTS <= p1.FileTS {
		t.Fatalf("roll after append: %v not after %v", p3, p1)
	}
}

// TestFileFullRolls: a full file rolls to the next. Finished files are
// truncated to their data, except with recycling, where a finished file
// keeps its prepared size (so that reusing it needs no zeroing) and only
// the last one is truncated, by Close.
func TestFileFullRolls(t *testing.T) {
	for _, tc := range []struct {
		mode    Prealloc
		recycle int
	}{{PreallocZero, -1}, {PreallocFallocate, -1}, {PreallocNone, -1}, {PreallocZero, 0}, {PreallocNone, 0}} {
		mode := tc.mode
		root := t.TempDir()
		opts := testOptions(root)
		opts.Prealloc, opts.RecycleFiles = mode, tc.recycle
		opts.FileSize = 32 << 10
		l := openLog(t, opts)
		appendN(t, l, 0, 100, 1000) // ~100 KiB: at least 3 files
		closeLog(t, l)
		recs, rep := replayAll(t, vfs.Default, root)
		if len(recs) != 100 || len(rep.Files) < 3 {
			t.Fatalf("mode %d: %d records in %d files", mode, len(recs), len(rep.Files))
		}
		for i, f := range rep.Files {
			want := f.End
			if tc.recycle == 0 && mode != PreallocNone && i < len(rep.Files)-1 {
				want = opts.FileSize
			}
			// A file the preparer had no time for is created empty and grows.
			if f.Size != want && f.Size != f.End || f.Size > opts.FileSize || f.Torn {
				t.Fatalf("mode %d, recycle %d: file %s size %d end %d torn %v, want size %d", mode, tc.recycle, f.Path, f.Size, f.End, f.Torn, want)
			}
		}
		// Open prepares the first file itself: it keeps its size.
		if f := rep.Files[0]; tc.recycle == 0 && mode != PreallocNone && f.Size != opts.FileSize {
			t.Fatalf("mode %d, recycle %d: first file size %d, want %d", mode, tc.recycle, f.Size, opts.FileSize)
		}
		for k := range recs {
			checkRecord(t, &recs[k], k, 1000)
		}
	}
}

func TestReplayTablets(t *testing.T) {
	root := t.TempDir()
	l := openLog(t, testOptions(root))
	appendN(t, l, 0, 20, 10)
	p1, _ := l.Roll()
	appendN(t, l, 20, 20, 10)
	p2, _ := l.Roll()
	appendN(t, l, 40, 20, 10)
	closeLog(t, l)
	from := map[string]int64{tabletOf(1): p1.FileTS, tabletOf(2): p2.FileTS, tabletOf(3): 0}
	got := map[string]int{}
	rep, err := ReplayTablets(context.Background(), vfs.Default, root, testPrefix, from, func(r *Record) error {
		got[r.TabletID]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// tabletOf(i) = i%5: 4 records per 20, per tablet.
	want := map[string]int{tabletOf(1): 8, tabletOf(2): 4, tabletOf(3): 12}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("tablet %s: %d records, want %d (all %v)", k, got[k], v, got)
		}
	}
	if len(got) != 3 || rep.Records != 24 || len(rep.Files) != 3 {
		t.Fatalf("got %v, report %+v", got, rep)
	}
}

func TestReplayFromMissingFileStartsAtNext(t *testing.T) {
	root := t.TempDir()
	l := openLog(t, testOptions(root))
	appendN(t, l, 0, 5, 10)
	p, _ := l.Roll()
	appendN(t, l, 5, 5, 10)
	closeLog(t, l)
	n := 0
	rep, err := Replay(context.Background(), vfs.Default, root, Position{Prefix: testPrefix, FileTS: p.FileTS - 1}, func(*Record) error { n++; return nil })
	if err != nil || n != 5 || len(rep.Files) != 1 {
		t.Fatalf("err %v, %d records, %d files", err, n, len(rep.Files))
	}
}

func TestDeleteBefore(t *testing.T) {
	root := t.TempDir()
	l := openLog(t, testOptions(root))
	var pos []Position
	pos = append(pos, l.Position())
	for i := 0; i < 4; i++ {
		appendN(t, l, i, 1, 10)
		p, _ := l.Roll()
		pos = append(pos, p)
	}
	appendN(t, l, 9, 1, 10)
	if _, err := l.DeleteBefore(Position{Prefix: testPrefix, FileTS: pos[4].FileTS + 1}); !errors.Is(err, ErrBadPosition) {
		t.Fatalf("DeleteBefore past the log: %v", err)
	}
	del, err := l.DeleteBefore(pos[2])
	if err != nil {
		t.Fatal(err)
	}
	if len(del) != 2 || del[0] != pos[0] || del[1] != pos[1] {
		t.Fatalf("deleted %v, want %v", del, pos[:2])
	}
	closeLog(t, l)
	files, _ := Files(vfs.Default, root, testPrefix)
	if len(files) != 3 || files[0] != pos[2] {
		t.Fatalf("left %v", files)
	}
	// The package function, as GC of a dead tserver's prefix uses it.
	if del, err := DeleteBefore(vfs.Default, root, pos[2]); err != nil || len(del) != 0 {
		t.Fatalf("second delete: %v %v", del, err)
	}
	recs, _ := replayAll(t, vfs.Default, root)
	if len(recs) != 3 || recs[0].Seq != 3 {
		t.Fatalf("after GC replayed %d records from seq %d", len(recs), recs[0].Seq)
	}
}

func TestClosedAndBadOptions(t *testing.T) {
	l := openLog(t, testOptions(t.TempDir()))
	closeLog(t, l)
	if _, err := l.Append(context.Background(), "t", testMutation(1, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := l.Roll(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Roll after Close: %v", err)
	}
	for _, opts := range []Options{
		{Root: "", Prefix: testPrefix},
		{Root: t.TempDir(), Prefix: "a:b"},
		{Root: t.TempDir(), Prefix: ""},
	} {
		if _, err := Open(context.Background(), opts); !errors.Is(err, ErrBadOptions) {
			t.Fatalf("Open(%+v): %v", opts, err)
		}
	}
}

func TestAppendContextCanceled(t *testing.T) {
	l := openLog(t, testOptions(t.TempDir()))
	defer closeLog(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, "t", testMutation(1, 1)); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Append: %v", err)
	}
}

func TestNamesRoundTrip(t *testing.T) {
	for _, addr := range []string{"10.0.0.7:7070", "[::1]:80", "host-a.example.com:1", "a_b", ".hidden", "..", "ü:1"} {
		p := FormatPrefix(addr)
		for i := 0; i < len(p); i++ {
			if !isSafe(p[i]) && p[i] != '_' {
				t.Fatalf("prefix %q of %q has unsafe byte", p, addr)
			}
		}
		if p == "." || p == ".." || p[0] == '.' {
			t.Fatalf("prefix %q", p)
		}
		got, err := ParsePrefix(p)
		if err != nil || got != addr {
			t.Fatalf("ParsePrefix(%q) = %q, %v; want %q", p, got, err, addr)
		}
	}
	for _, bad := range []string{"", "a:b", "_3", "_zz", "_41" /* 'A' must not be escaped */, "a/b"} {
		if _, err := ParsePrefix(bad); !errors.Is(err, ErrBadName) {
			t.Fatalf("ParsePrefix(%q): %v", bad, err)
		}
	}
	for _, ts := range []int64{0, 1, 1764547200000000, 1<<63 - 1} {
		name := FormatFileName(ts)
		got, err := ParseFileName(name)
		if err != nil || got != ts {
			t.Fatalf("ParseFileName(%q) = %d, %v", name, got, err)
		}
	}
	for _, bad := range []string{"1.log", "00000000000000000001.log.tmp", "0000000000000000000a.log", "99999999999999999999.log", "prepared-1.tmp"} {
		if _, err := ParseFileName(bad); !errors.Is(err, ErrBadName) {
			t.Fatalf("ParseFileName(%q): %v", bad, err)
		}
	}
}
