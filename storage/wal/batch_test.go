package wal

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

func TestAppendBatch(t *testing.T) {
	t.Run("one group commit", func(t *testing.T) {
		root := t.TempDir()
		l := openLog(t, testOptions(root))
		before := l.Stats()
		var ms []*mutation.RowMutation
		for i := range 40 {
			ms = append(ms, testMutation(i, 100)) // 40 small records fit one 16 KiB batch
		}
		seqs, errs := l.AppendBatch(context.Background(), "tablet-a", ms)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			if i > 0 && seqs[i] != seqs[i-1]+1 {
				t.Fatalf("seqs %v are not consecutive", seqs)
			}
		}
		after := l.Stats()
		if got := after.Batches - before.Batches; got != 1 {
			t.Fatalf("%d group-commit batches for one AppendBatch of 40 small records, want 1", got)
		}
		if got := after.Syncs - before.Syncs; got != 1 {
			t.Fatalf("%d fdatasyncs, want 1", got)
		}
		closeLog(t, l)
		recs, _ := replayAll(t, vfs.Default, root)
		if len(recs) != len(ms) {
			t.Fatalf("replayed %d records, want %d", len(recs), len(ms))
		}
		for i, r := range recs {
			if r.TabletID != "tablet-a" || string(r.Mutation.Row) != string(ms[i].Row) || r.Seq != seqs[i] {
				t.Fatalf("record %d: %s %q seq %d, want tablet-a %q seq %d", i, r.TabletID, r.Mutation.Row, r.Seq, ms[i].Row, seqs[i])
			}
		}
	})

	t.Run("spans batches and files, with concurrent appends", func(t *testing.T) {
		root := t.TempDir()
		l := openLog(t, testOptions(root)) // 16 KiB batches, 256 KiB files
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := range 10 {
					var ms []*mutation.RowMutation
					for k := range 30 {
						ms = append(ms, testMutation(1000*w+30*b+k, 1500)) // 45 KiB per call
					}
					_, errs := l.AppendBatch(context.Background(), tabletOf(w), ms)
					if err := errors.Join(errs...); err != nil {
						t.Errorf("AppendBatch: %v", err)
						return
					}
				}
			}()
		}
		appendN(t, l, 100000, 50, 300)
		wg.Wait()
		closeLog(t, l)
		recs, _ := replayAll(t, vfs.Default, root)
		if want := 4*10*30 + 50; len(recs) != want {
			t.Fatalf("replayed %d records, want %d", len(recs), want)
		}
		files, err := Files(vfs.Default, root, testPrefix)
		if err != nil || len(files) < 3 {
			t.Fatalf("%d files (%v): want the batches to roll several", len(files), err)
		}
	})

	t.Run("per-record errors", func(t *testing.T) {
		root := t.TempDir()
		l := openLog(t, testOptions(root))
		defer closeLog(t, l)
		huge := &mutation.RowMutation{Row: []byte("huge"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "f", Value: make([]byte, MaxRecordBytes+1)}}}
		_, errs := l.AppendBatch(context.Background(), "t", []*mutation.RowMutation{testMutation(1, 10), huge, testMutation(2, 10)})
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], ErrRecordTooLarge) {
			t.Fatalf("errs %v: want only the huge record to fail with ErrRecordTooLarge", errs)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, errs = l.AppendBatch(ctx, "t", []*mutation.RowMutation{testMutation(3, 10), testMutation(4, 10)})
		for i, err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("record %d of a cancelled batch: %v, want context.Canceled", i, err)
			}
		}
	})
}

// TestSingleFileAppendBatch: a batch larger than the unsynced window
// (ChildLogMaxFlush) syncs its own records before it waits for room, so
// it neither deadlocks nor breaks the window bound, and every record
// replays.
func TestSingleFileAppendBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "splitlog", "c1.log")
	s, err := CreateSingle(vfs.Default, path, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var ms []*mutation.RowMutation
	for i := range 30 {
		ms = append(ms, testMutation(i, 100<<10)) // 3 MB in all, three windows
	}
	for i, err := range s.AppendBatch(context.Background(), "c1", ms) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	if _, err := ReplayFile(vfs.Default, path, func(r *Record) error {
		if string(r.Mutation.Row) != string(ms[n].Row) {
			t.Fatalf("record %d is row %q, want %q", n, r.Mutation.Row, ms[n].Row)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Fatalf("replayed %d records, want %d", n, len(ms))
	}
}
