package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"bighive/storage/vfs"
)

func TestSingleFileAppendReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "splitlog", "00000007.log")
	f, err := CreateSingle(vfs.Default, path, "00000007")
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				if err := f.Append(context.Background(), "00000007", testMutation(i, 100)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Append(context.Background(), "x", testMutation(1, 1)); !errors.Is(err, ErrSingleClosed) {
		t.Fatalf("append after close: %v, want ErrSingleClosed", err)
	}
	seen := map[string]bool{}
	rep, err := ReplayFile(vfs.Default, path, func(r *Record) error {
		seen[string(r.Mutation.Row)] = true
		if r.TabletID != "00000007" {
			t.Errorf("tablet %q", r.TabletID)
		}
		return nil
	})
	if err != nil || rep.Records != n || len(seen) != n || rep.Torn {
		t.Fatalf("replay: %+v, %d rows, err %v", rep, len(seen), err)
	}
	if _, err := CreateSingle(vfs.Default, path, "00000007"); err == nil {
		t.Fatal("CreateSingle over an existing file succeeded")
	}
}

func TestSingleFileTornAndCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.log")
	f, err := CreateSingle(vfs.Default, path, "a")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := f.Append(context.Background(), "a", testMutation(i, 50)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	data, _ := os.ReadFile(path)
	cases := []struct {
		name    string
		mutate  func([]byte) []byte
		records int
		torn    bool
		corrupt bool
	}{
		{"intact", func(b []byte) []byte { return b }, 10, false, false},
		{"cut in the last record", func(b []byte) []byte { return b[:len(b)-7] }, 9, true, false},
		{"flipped byte in the middle", func(b []byte) []byte {
			b = append([]byte(nil), b...)
			b[len(b)/2] ^= 0xff
			return b
		}, 0, true, false}, // within the wide torn window: treated as a torn tail
		{"bad header", func(b []byte) []byte {
			b = append([]byte(nil), b...)
			b[20] ^= 0xff
			return b
		}, 0, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "case.log")
			if err := os.WriteFile(p, tc.mutate(data), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := ReplayFile(vfs.Default, p, nil)
			var ce *CorruptionError
			if tc.corrupt != errors.As(err, &ce) {
				t.Fatalf("err %v, corrupt want %v", err, tc.corrupt)
			}
			if tc.corrupt {
				return
			}
			if tc.records > 0 && rep.Records != tc.records || rep.Torn != tc.torn {
				t.Fatalf("report %+v, want %d records torn=%v", rep, tc.records, tc.torn)
			}
		})
	}
}

func TestSingleFileRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.log")
	f, err := CreateSingle(vfs.Default, path, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("stat after Remove: %v", err)
	}
}
