package tserver

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"bighive/storage/blockstore"
	"bighive/storage/vfs"
)

// TestStoresCountUsers: a read-only store stays open while some user
// holds it, closes with its last user (a second release changes nothing),
// opens again on demand and reads blocks its owner committed after the
// open, and a new open replaces it for new users when the owner's list of
// data directories changed, while the old one closes with its own last
// user.
func TestStoresCountUsers(t *testing.T) {
	root := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func(uuid string) blockstore.Manager {
		m, _, err := blockstore.Open(blockstore.Options{Dirs: []string{filepath.Join(root, blocksDir, uuid)}, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// commit opens the other tserver's store as its owner, commits a
	// block to it and closes it.
	commit := func() blockstore.BlockID {
		owner := open("other")
		defer owner.Close()
		b, err := owner.CreateBlock(blockstore.CreateBlockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Append([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		return b.ID()
	}
	first := commit()
	own := open("own")
	defer own.Close()
	s := newStores(vfs.Default, root, "own", own, log)
	defer s.close()

	if m, release, err := s.acquire("own"); err != nil || m != own {
		t.Fatalf("own store: %v, %v", m, err)
	} else {
		release()
	}
	want := func(stage string, n int) {
		t.Helper()
		if got := s.openCount(); got != n {
			t.Fatalf("%s: %d read-only stores open, want %d", stage, got, n)
		}
	}
	want("start", 0)
	m1, r1, err := s.acquire("other")
	if err != nil {
		t.Fatal(err)
	}
	m2, r2, err := s.acquire("other")
	if err != nil || m2 != m1 {
		t.Fatalf("second acquire: %v, %v (want the open store)", m2, err)
	}
	want("two users", 1)
	r1()
	r1() // no effect
	want("one user left", 1)
	if _, err := m2.OpenBlock(first); err != nil {
		t.Fatalf("the remaining user cannot read: %v", err)
	}
	r2()
	want("no user", 0)

	m3, r3, err := s.acquire("other")
	if err != nil || m3 == m1 {
		t.Fatalf("acquire after the close: %v, %v (want a new open)", m3, err)
	}
	// The owner commits a block after the open: the open store reads it.
	if rb, err := m3.OpenBlock(commit()); err != nil {
		t.Fatalf("a block committed after the open: %v", err)
	} else {
		rb.Close()
	}
	// The owner's list of data directories changes (here only its
	// spelling): the next acquire opens the store anew.
	dir := filepath.Join(root, blocksDir, "other")
	if err := os.WriteFile(filepath.Join(root, blocksDir, "other"+dirsSuffix), []byte(dir+"/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m4, r4, err := s.acquire("other")
	if err != nil || m4 == m3 {
		t.Fatalf("acquire after the directory list changed: %v, %v (want a new open)", m4, err)
	}
	want("old and new", 2)
	m5, r5, err := s.acquire("other")
	if err != nil || m5 != m4 {
		t.Fatalf("acquire after the new open: %v, %v (want the new open)", m5, err)
	}
	r3()
	want("old released", 1)
	r4()
	r5()
	want("all released", 0)
}
