package wal

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

const testPrefix = "127.0.0.1_3a7070"

// testOptions are small files without pre-zeroing unless a test asks.
func testOptions(root string) Options {
	return Options{Root: root, Prefix: testPrefix, FileSize: 256 << 10, MaxBatchBytes: 16 << 10, Prealloc: PreallocNone}
}

func openLog(t *testing.T, opts Options) *Log {
	t.Helper()
	l, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func closeLog(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// testMutation is a deterministic mutation; size is the value length.
func testMutation(i, size int) *mutation.RowMutation {
	v := bytes.Repeat([]byte{byte(i)}, size)
	m := &mutation.RowMutation{
		Row: fmt.Appendf(nil, "row-%06d", i),
		Ops: []mutation.Op{
			{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: int64(i), Value: v},
		},
	}
	if i%3 == 0 {
		m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteColumn, Family: "g", Qualifier: []byte("x"), Timestamp: 5, End: 9})
	}
	if i%7 == 0 {
		m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteFamily, Family: "h", Timestamp: int64(i)})
	}
	return m
}

func tabletOf(i int) string { return fmt.Sprintf("tablet-%d", i%5) }

func appendN(t *testing.T, l *Log, from, n, size int) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := from; i < from+n; i++ {
		seq, err := l.Append(context.Background(), tabletOf(i), testMutation(i, size))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// replayAll replays every file of the test prefix.
func replayAll(t *testing.T, fsys vfs.FS, root string) ([]Record, ReplayReport) {
	t.Helper()
	var recs []Record
	rep, err := Replay(context.Background(), fsys, root, Position{Prefix: testPrefix}, func(r *Record) error {
		recs = append(recs, *r)
		return nil
	})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return recs, rep
}

func encodeMutation(m *mutation.RowMutation) []byte { return m.Append(nil) }

// checkRecord fails unless r holds mutation i of tablet tabletOf(i).
func checkRecord(t *testing.T, r *Record, i, size int) {
	t.Helper()
	if r.TabletID != tabletOf(i) {
		t.Fatalf("seq %d: tablet %q, want %q", r.Seq, r.TabletID, tabletOf(i))
	}
	if got, want := encodeMutation(&r.Mutation), encodeMutation(testMutation(i, size)); !bytes.Equal(got, want) {
		t.Fatalf("seq %d: mutation differs", r.Seq)
	}
}
