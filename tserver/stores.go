package tserver

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"bighive/blockstore"
	"bighive/internal/vfs"
)

// stores opens block stores by UUID: this tserver's own store read-write,
// any other tserver's read-only (DESIGN.md: a tablet that moved is read
// from the store it was written to). Read-only stores are opened once and
// reopened when a block is missing, since their owner may have committed
// blocks after the open. A store is reopened only when a TSFile's footer
// is missing from the open one.
type stores struct {
	fs   vfs.FS
	root string
	own  string
	mgr  blockstore.Manager
	log  *slog.Logger

	mu     sync.Mutex
	others map[string]blockstore.Manager
	// retired are read-only managers replaced by a fresher open; tablets
	// opened over them still read through them, so they close only with
	// the tserver.
	retired []blockstore.Manager
}

func newStores(fs vfs.FS, root, own string, mgr blockstore.Manager, log *slog.Logger) *stores {
	return &stores{fs: fs, root: root, own: own, mgr: mgr, log: log, others: map[string]blockstore.Manager{}}
}

// get returns the store with this UUID; fresh asks for a reopen of a
// read-only store.
func (s *stores) get(uuid string, fresh bool) (blockstore.Manager, error) {
	if uuid == "" || uuid == s.own {
		return s.mgr, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.others[uuid]; ok && !fresh {
		return m, nil
	}
	dirs, err := storeDirs(s.fs, s.root, uuid)
	if err != nil {
		return nil, err
	}
	m, _, err := blockstore.Open(blockstore.Options{Dirs: dirs, FS: s.fs, ReadOnly: true, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("tserver: open block store %s read-only: %w", uuid, err)
	}
	if old, ok := s.others[uuid]; ok {
		s.retired = append(s.retired, old)
	}
	s.others[uuid] = m
	return m, nil
}

func (s *stores) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, m := range s.others {
		errs = append(errs, m.Close())
	}
	for _, m := range s.retired {
		errs = append(errs, m.Close())
	}
	s.others, s.retired = nil, nil
	return errors.Join(errs...)
}
