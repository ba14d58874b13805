package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"bighive/storage/vfs"
)

// TestSplitLogAndRecoveryFiles splits a multi-file log by tablet into two
// ranges: each file is read once in total, each tablet's recovery files
// hold exactly its records, and they replay back.
func TestSplitLogAndRecoveryFiles(t *testing.T) {
	root := t.TempDir()
	opts := testOptions(root)
	l := openLog(t, opts)
	appendN(t, l, 0, 100, 100)
	mid, err := l.Roll()
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 100, 100, 100)
	closeLog(t, l)
	files, err := Files(vfs.Default, root, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range files {
		st, err := os.Stat(FilePath(root, f))
		if err != nil {
			t.Fatal(err)
		}
		total += st.Size()
	}
	keep := map[string]bool{"tablet-1": true, "tablet-3": true}
	got := map[string][]*Record{}
	var read int64
	for _, r := range []SplitRange{{testPrefix, 0, mid.FileTS}, {testPrefix, mid.FileTS, Unbounded}} {
		recs, rep, err := SplitLog(context.Background(), vfs.Default, root, r, keep)
		if err != nil {
			t.Fatalf("split %s: %v", r, err)
		}
		read += rep.BytesRead
		paths, _, err := WriteRecoveryFiles(vfs.Default, root, r, recs)
		if err != nil {
			t.Fatal(err)
		}
		for tab, rel := range paths {
			if rel != r.RecoveryFile(tab) {
				t.Fatalf("path %s, want %s", rel, r.RecoveryFile(tab))
			}
			if _, err := ReplayRecoveryFile(vfs.Default, root, rel, func(rec *Record) error {
				c := *rec
				got[tab] = append(got[tab], &c)
				return nil
			}); err != nil {
				t.Fatalf("replay %s: %v", rel, err)
			}
		}
	}
	if read != total {
		t.Fatalf("splitting read %d bytes, the log has %d: each file must be read exactly once", read, total)
	}
	for _, tab := range []string{"tablet-1", "tablet-3"} {
		var want []int
		for i := 0; i < 200; i++ {
			if tabletOf(i) == tab {
				want = append(want, i)
			}
		}
		if len(got[tab]) != len(want) {
			t.Fatalf("%s: %d records, want %d", tab, len(got[tab]), len(want))
		}
		for j, i := range want {
			checkRecord(t, got[tab][j], i, 100)
		}
	}
	if len(got) != 2 {
		t.Fatalf("recovery files for %d tablets, want 2", len(got))
	}
}

func TestRecoveryFileCorruption(t *testing.T) {
	r := SplitRange{Prefix: testPrefix, From: 5, Until: Unbounded}
	var recs []*Record
	for i := 0; i < 3; i++ {
		recs = append(recs, &Record{Seq: uint64(10 + 2*i), Timestamp: int64(i), TabletID: "t1", Mutation: *testMutation(i, 20)})
	}
	good, err := EncodeRecoveryFile(r, recs)
	if err != nil {
		t.Fatal(err)
	}
	hlen := recoveryHeaderFix + len(testPrefix) + 4
	tests := []struct {
		name    string
		damage  func([]byte) []byte
		wantOff int64
	}{
		{"header magic", func(b []byte) []byte { b[0] ^= 1; return b }, 0},
		{"header crc", func(b []byte) []byte { b[13] ^= 1; return b }, 0},
		{"record byte", func(b []byte) []byte { b[hlen+12] ^= 1; return b }, int64(hlen)},
		{"footer count", func(b []byte) []byte { b[len(b)-10] ^= 1; return b }, int64(len(good) - recoveryFooterLen)},
		{"cut in the footer", func(b []byte) []byte { return b[:len(b)-3] }, int64(len(good) - recoveryFooterLen)},
		{"cut in a record", func(b []byte) []byte { return b[:hlen+20] }, int64(hlen)},
		{"trailing bytes", func(b []byte) []byte { return append(b, 1) }, int64(len(good) - recoveryFooterLen)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.damage(append([]byte(nil), good...))
			err := scanRecoveryFile("f", data, func(*Record) error { return nil })
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a *CorruptionError", err)
			}
			if ce.File != "f" || ce.Offset != tc.wantOff {
				t.Fatalf("corruption at %s:%d, want f:%d (%v)", ce.File, ce.Offset, tc.wantOff, err)
			}
		})
	}
	n := 0
	if err := scanRecoveryFile("f", good, func(*Record) error { n++; return nil }); err != nil || n != 3 {
		t.Fatalf("good file: %d records, %v", n, err)
	}
	if _, err := EncodeRecoveryFile(r, []*Record{recs[1], recs[0]}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("out-of-order records: %v, want ErrBadRecord", err)
	}
}

func TestTaskIDRoundTrip(t *testing.T) {
	r := SplitRange{Prefix: testPrefix, From: 12, Until: Unbounded}
	split, del, err := ParseTaskID(SplitTaskID(r))
	if err != nil || split == nil || *split != r || del != "" {
		t.Fatalf("split task: %v %q %v", split, del, err)
	}
	p := r.RecoveryFile("t0000000000000001")
	split, del, err = ParseTaskID(DeleteTaskID(p))
	if err != nil || split != nil || del != p {
		t.Fatalf("delete task: %v %q %v", split, del, err)
	}
	// A retired child log can be deleted too.
	if _, del, err := ParseTaskID(DeleteTaskID("splitlog/t0000000000000009.log")); err != nil || del != "splitlog/t0000000000000009.log" {
		t.Fatalf("child log delete task: %q %v", del, err)
	}
	for _, bad := range []string{"", "split/", "split/x/1-2", "delete/../etc/passwd", "delete/recovery/" + r.String() + "/../../x.log",
		"delete/splitlog/.log", "delete/splitlog/../wal/x.log", "delete/splitlog/x.txt", "delete/splitlog/a/b.log",
		"split/" + testPrefix + "/00000000000000000002-00000000000000000001", "other/x"} {
		if _, _, err := ParseTaskID(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("ParseTaskID(%q) = %v, want ErrBadName", bad, err)
		}
	}
	if got := filepath.Dir(p); got != filepath.Join("recovery", testPrefix, r.String()[len(testPrefix)+1:]) {
		t.Fatalf("dir %s", got)
	}
}
