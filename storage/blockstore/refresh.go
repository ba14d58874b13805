package blockstore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"bighive/storage/vfs"
)

// A read-only open sees the blocks its store's owner had committed when it
// opened; the owner goes on committing. So a read-only manager that does
// not find a block looks again before it answers ErrNotFound: it reloads
// its view of the directories (refresh) and tries once more. A block a
// reader is asked for was named by a commit the owner made before the
// reader asked (a TSFile is named by the metadata only once its creation
// transaction committed), so a refresh that starts after the miss sees it.

// viewRefresh serializes a read-only manager's refreshes and counts the
// ones started, so that callers that missed at once share one.
type viewRefresh struct {
	mu      sync.Mutex
	started atomic.Uint64
}

// refreshed runs refresh for a caller that missed a block when the
// started count was seen, unless a refresh started since (it began after
// the miss, so it saw what the caller needs, and it ended, since mu is
// free now).
func (v *viewRefresh) refreshed(seen uint64, refresh func() error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.started.Load() != seen {
		return nil
	}
	v.started.Add(1)
	return refresh()
}

// notFound is OpenBlock's error for a block that a read-only manager does
// not hold even after a refresh; err is what the refresh failed with, if
// anything (a *CorruptionError names the file and offset).
func notFound(id BlockID, dirs []*dataDir, err error) error {
	paths := make([]string, 0, len(dirs))
	for _, d := range dirs {
		paths = append(paths, d.path)
	}
	where := strings.Join(paths, ", ")
	if err != nil {
		return fmt.Errorf("%w: %s: not in %s, whose reload failed: %w", ErrNotFound, id, where, err)
	}
	return fmt.Errorf("%w: %s: not in %s, reloaded after the miss", ErrNotFound, id, where)
}

// refresh brings a read-only log manager's index up to the store's disk:
// every container of its healthy directories is looked at, a new one is
// replayed and added, a known one whose metadata file changed size is
// replayed again (whole: its owner may have rewritten it at a restart),
// and every live block that the index lacks is added. What the owner
// deleted since stays in the index, as before the refresh: IDs are never
// reused. A torn last record is an append in progress and is left for the
// next refresh; a corrupt or malformed record fails the refresh with a
// *CorruptionError naming the file and offset, after the records before
// it and the other containers were loaded (an append another host's
// reader saw half done looks corrupt too, so that container is read
// again at the next refresh).
func (m *logManager) refresh() error {
	began := time.Now()
	var errs []error
	var blocks int
	m.cmu.Lock()
	before := len(m.containers)
	m.cmu.Unlock()
	for _, d := range m.dirs {
		if d.failed.Load() {
			continue
		}
		names, err := containerNames(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			m.cmu.Lock()
			c := m.containers[name]
			m.cmu.Unlock()
			var n int
			if c == nil {
				n, err = m.refreshNew(d, name)
			} else {
				n, err = m.refreshKnown(c)
			}
			blocks += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	m.cmu.Lock()
	containers := len(m.containers) - before
	m.cmu.Unlock()
	m.opts.Logger.Info("blockstore: read-only view reloaded", "dirs", len(m.dirs), "new_containers", containers,
		"new_blocks", blocks, "errors", len(errs), "took", time.Since(began))
	return errors.Join(errs...)
}

// containerNames lists the containers of d whose two files exist, as
// paths without suffix, sorted.
func containerNames(d *dataDir) ([]string, error) {
	ents, err := d.fs.ReadDir(d.path)
	if err != nil {
		return nil, d.ioError(fmt.Errorf("blockstore: list %s: %w", d.path, err))
	}
	var data, meta = map[string]bool{}, map[string]bool{}
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, vfs.TempSuffix):
		case strings.HasSuffix(n, dataSuffix):
			data[strings.TrimSuffix(n, dataSuffix)] = true
		case strings.HasSuffix(n, metaSuffix):
			meta[strings.TrimSuffix(n, metaSuffix)] = true
		}
	}
	var out []string
	for k := range data {
		if meta[k] {
			out = append(out, filepath.Join(d.path, k))
		}
	}
	sort.Strings(out)
	return out, nil
}

// refreshNew replays a container created after the view opened and adds
// it with its live blocks (those before a bad record, if any); it returns
// the blocks added. One too new to have its header yet is left for the
// next refresh.
func (m *logManager) refreshNew(d *dataDir, name string) (int, error) {
	rep := &Report{}
	lc, err := m.loadContainer(d, name, rep)
	if err != nil || lc == nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = nil // removed meanwhile (a dead container)
		}
		return 0, err
	}
	fatal := rep.FatalError()
	if fatal != nil {
		lc.c.seenMeta = -1 // read it again at the next refresh
	}
	m.cmu.Lock()
	if m.closed.Load() { // Close, which sets closed before it takes cmu, would miss it
		m.cmu.Unlock()
		lc.c.data.Close()
		lc.c.meta.Close()
		return 0, ErrClosed
	}
	m.containers[lc.c.name] = lc.c
	m.cmu.Unlock()
	return m.addLive(lc.c, lc.live), fatal
}

// refreshKnown replays again the metadata of a container the view holds
// when the file's size changed since the view last read it, and adds the
// live blocks the index lacks; it returns how many it added.
func (m *logManager) refreshKnown(c *container) (int, error) {
	d := c.dir
	st, err := d.fs.Stat(c.metaPath())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil // removed meanwhile (a dead container)
		}
		return 0, d.ioError(fmt.Errorf("blockstore: stat %s: %w", c.metaPath(), err))
	}
	c.metaMu.Lock()
	seen := c.seenMeta
	c.metaMu.Unlock()
	if st.Size() == seen {
		return 0, nil
	}
	// By path, not through the open handle: a restarted owner may have
	// replaced the file (a metadata rewrite is a rename).
	buf, err := vfs.ReadFile(d.fs, c.metaPath())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, d.ioError(fmt.Errorf("blockstore: read %s: %w", c.metaPath(), err))
	}
	dst, err := d.fs.Stat(c.dataPath())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, d.ioError(fmt.Errorf("blockstore: stat %s: %w", c.dataPath(), err))
	}
	// Replayed into a stand-in, so the container's own counts and cursor
	// are not counted twice; the blocks added are moved onto it.
	rep := &Report{}
	lc := &loadedContainer{c: &container{m: m, dir: d, name: c.name}, partialAt: -1}
	lc.replay(buf, dst.Size(), rep)
	err = rep.FatalError()
	if err == nil {
		c.metaMu.Lock()
		c.seenMeta = int64(len(buf))
		c.metaMu.Unlock()
	}
	return m.addLive(c, lc.live), err
}

// addLive puts into the index, as blocks of c, the live blocks it lacks.
func (m *logManager) addLive(c *container, live map[BlockID]*logBlock) int {
	n := 0
	for id, b := range live {
		if m.blocks.has(id) {
			continue
		}
		nb := &logBlock{c: c, id: id, off: b.off, n: b.n}
		if !m.blocks.insert(id, nb) {
			continue
		}
		c.mu.Lock()
		c.live++
		c.total++
		c.liveBytes += b.n
		c.mu.Unlock()
		n++
	}
	return n
}

// lookFor is the file manager's refresh for one block: a read-only
// manager that does not find id looks for its file in each healthy
// directory and adds it to the index. It reports whether it found it.
func (m *fileManager) lookFor(id BlockID) (bool, error) {
	var errs []error
	for _, d := range m.dirs {
		if d.failed.Load() {
			continue
		}
		name := filepath.Join(d.path, blockFileName(id))
		st, err := d.fs.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, d.ioError(fmt.Errorf("blockstore: stat %s: %w", name, err)))
			continue
		}
		m.blocks.insert(id, &fileBlock{d: d, id: id, path: name, n: st.Size()})
		return true, nil
	}
	return false, errors.Join(errs...)
}
