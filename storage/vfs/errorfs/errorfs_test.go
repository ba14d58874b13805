package errorfs

import (
	"errors"
	"io/fs"
	"testing"

	"bighive/storage/vfs"
)

func TestOnIndexPathMatch(t *testing.T) {
	mem := NewCrashableMem()
	inj := OnIndex(1, And(Kinds(OpWrite), PathMatch("*.data")))
	fsys := Wrap(mem, inj)
	f, _ := fsys.Create("/a.data")
	g, _ := fsys.Create("/a.meta")
	for i, tc := range []struct {
		f       vfs.File
		wantErr bool
	}{{f, false}, {g, false}, {g, false}, {f, true}, {f, false}} {
		_, err := tc.f.WriteAt([]byte("x"), 0)
		if got := errors.Is(err, ErrInjected); got != tc.wantErr {
			t.Fatalf("write %d: err %v, want injected=%v", i, err, tc.wantErr)
		}
	}
	if !inj.Fired() || inj.Target().Path != "/a.data" {
		t.Fatalf("fired %v target %v", inj.Fired(), inj.Target())
	}
}

func TestCrashClone(t *testing.T) {
	mem := NewCrashableMem()
	mem.MkdirAll("/d", 0o755)
	mem.SyncDir("/")
	write := func(name, s string, sync bool) {
		f, err := mem.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte(s), 0)
		if sync {
			f.Sync()
		}
		f.Close()
	}
	write("/d/synced", "durable", true)
	write("/d/unsynced", "volatile", false)
	mem.SyncDir("/d")
	write("/d/nodirsync", "lost", true)
	f, _ := mem.OpenFile("/d/synced", 2, 0)
	f.WriteAt([]byte("XX"), 0) // not synced: dropped
	f.Close()
	mem.Rename("/d/unsynced", "/d/renamed") // no SyncDir: reverted
	mem.Remove("/d/synced")                 // no SyncDir: reverted
	c := mem.CrashClone()
	tests := []struct {
		name string
		want string
		err  error
	}{
		{"/d/synced", "durable", nil},
		{"/d/unsynced", "", nil},
		{"/d/renamed", "", fs.ErrNotExist},
		{"/d/nodirsync", "", fs.ErrNotExist},
	}
	for _, tc := range tests {
		b, err := vfs.ReadFile(c, tc.name)
		if !errors.Is(err, tc.err) || (err == nil && string(b) != tc.want) {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, b, err, tc.want, tc.err)
		}
	}
	// The original is unchanged.
	if b, _ := vfs.ReadFile(mem, "/d/renamed"); string(b) != "volatile" {
		t.Errorf("original changed: %q", b)
	}
}

func TestCrashAtStopsEverything(t *testing.T) {
	mem := NewCrashableMem()
	var crashed *MemFS
	c := CrashAt(1, Kinds(OpCreate), mem, &crashed)
	fsys := Wrap(mem, c)
	if _, err := fsys.Create("/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Create("/b"); !errors.Is(err, ErrInjected) {
		t.Fatalf("crash point: %v", err)
	}
	if _, err := fsys.Stat("/a"); !errors.Is(err, ErrInjected) {
		t.Fatalf("after crash: %v", err)
	}
	if op, ok := c.Crashed(); !ok || op.Path != "/b" || crashed == nil {
		t.Fatalf("crashed %v %v", op, ok)
	}
	if _, err := crashed.Stat("/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("/a without SyncDir survived: %v", err)
	}
}

func TestPunchAndAllocated(t *testing.T) {
	mem := NewCrashableMem()
	f, _ := mem.Create("/f")
	f.WriteAt(make([]byte, 4*chunkSize), 0)
	before, _ := mem.Allocated("/f")
	f.PunchHole(chunkSize, 2*chunkSize)
	after, _ := mem.Allocated("/f")
	if before-after != 2*chunkSize {
		t.Fatalf("allocated %d → %d", before, after)
	}
	if st, _ := f.Stat(); st.Size() != 4*chunkSize {
		t.Fatalf("size changed by punch: %d", st.Size())
	}
}
