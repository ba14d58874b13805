package tserver

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"bighive/storage/blockstore"
	"bighive/storage/vfs"
)

// stores opens block stores by UUID: this tserver's own store read-write,
// any other tserver's read-only (a tablet that moved is read from the store
// it was written to). A read-only store is opened on demand and counted by
// its users (one per open TSFile of a tablet here); it is closed when its
// last user releases it, and opened again by the next acquire. An open
// store sees the blocks its owner commits after the open (a read-only
// view reloads itself when it misses a block; storage/blockstore's doc),
// but not a data directory its owner added at a restart: so an acquire
// opens the store afresh when its owner's list of data directories
// changed since the open, and the replaced open stays until its own last
// user releases it.
type stores struct {
	fs   vfs.FS
	root string
	own  string
	mgr  blockstore.Manager
	log  *slog.Logger

	mu sync.Mutex
	// current is the newest read-only open of each other store, by UUID.
	current map[string]*roStore
	// open holds every read-only open not yet closed: current ones and
	// replaced ones that still have users.
	open map[*roStore]struct{}
}

// roStore is one read-only open of another tserver's block store.
type roStore struct {
	uuid  string
	dirs  []string // the owner's data directories it was opened over
	mgr   blockstore.Manager
	users int // guarded by stores.mu
}

func newStores(fs vfs.FS, root, own string, mgr blockstore.Manager, log *slog.Logger) *stores {
	return &stores{fs: fs, root: root, own: own, mgr: mgr, log: log,
		current: map[string]*roStore{}, open: map[*roStore]struct{}{}}
}

// acquire returns the store with this UUID and a release function the
// caller calls once when it no longer reads through the store (more calls
// do nothing). A read-only store is opened anew when its owner's list of
// data directories is not the one the open store was opened over.
func (s *stores) acquire(uuid string) (blockstore.Manager, func(), error) {
	if uuid == "" || uuid == s.own {
		return s.mgr, func() {}, nil
	}
	dirs, err := storeDirs(s.fs, s.root, uuid)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		return nil, nil, fmt.Errorf("tserver: block store %s: %w", uuid, errStoresClosed)
	}
	st, ok := s.current[uuid]
	if !ok || !slices.Equal(st.dirs, dirs) {
		m, _, err := blockstore.Open(blockstore.Options{Dirs: dirs, FS: s.fs, ReadOnly: true, Logger: s.log})
		if err != nil {
			return nil, nil, fmt.Errorf("tserver: open block store %s read-only: %w", uuid, err)
		}
		st = &roStore{uuid: uuid, dirs: dirs, mgr: m}
		s.current[uuid] = st // a replaced open closes with its last user
		s.open[st] = struct{}{}
	}
	st.users++
	var once sync.Once
	return st.mgr, func() { once.Do(func() { s.release(st) }) }, nil
}

// release drops one user of st and closes it when that was the last.
func (s *stores) release(st *roStore) {
	s.mu.Lock()
	st.users--
	last := st.users == 0
	if _, open := s.open[st]; !open {
		last = false // closed with the tserver already
	}
	if last {
		delete(s.open, st)
		if s.current[st.uuid] == st {
			delete(s.current, st.uuid)
		}
	}
	s.mu.Unlock()
	if !last {
		return
	}
	if err := st.mgr.Close(); err != nil {
		s.log.Warn("closing a read-only block store", "store", st.uuid, "err", err)
	}
}

// openCount is the number of read-only stores open now.
func (s *stores) openCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

var errStoresClosed = errors.New("tserver: closed")

// close closes every read-only store still open; later acquires of other
// stores fail.
func (s *stores) close() error {
	s.mu.Lock()
	open := s.open
	s.current, s.open = nil, nil
	s.mu.Unlock()
	var errs []error
	for st := range open {
		errs = append(errs, st.mgr.Close())
	}
	return errors.Join(errs...)
}
