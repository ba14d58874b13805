package blockstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"bighive/proto/storagepb"
)

// groupState maps tablets to their data dir groups and back.
type groupState struct {
	mu       sync.Mutex
	byTablet map[string][]string            // tablet → dir UUIDs, in joining order
	byDir    map[string]map[string]struct{} // dir UUID → tablets
	rng      *rand.Rand
}

func (g *groupState) init(seed uint64) {
	if seed == 0 {
		seed = rand.Uint64()
	}
	g.byTablet = map[string][]string{}
	g.byDir = map[string]map[string]struct{}{}
	g.rng = rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

func (g *groupState) addLocked(tablet, uuid string) {
	g.byTablet[tablet] = append(g.byTablet[tablet], uuid)
	s := g.byDir[uuid]
	if s == nil {
		s = map[string]struct{}{}
		g.byDir[uuid] = s
	}
	s[tablet] = struct{}{}
}

func (g *groupState) removeLocked(tablet string) {
	for _, u := range g.byTablet[tablet] {
		delete(g.byDir[u], tablet)
	}
	delete(g.byTablet, tablet)
}

// statfsSpace is the default Options.FreeSpace.
func statfsSpace(dir string) (avail, capacity int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize, nil
}

// defaultMaxOpenFiles is 40% of the soft RLIMIT_NOFILE, at least 64.
func defaultMaxOpenFiles() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1024
	}
	return max(64, int(rl.Cur*2/5))
}

// space returns d's available bytes (-1 unknown) and whether d is full
// (below the reserve), refreshing the cached figures when older than
// Options.FreeSpaceRefresh.
func (fm *FsManager) space(d *dataDir) (avail int64, full bool) {
	o := fm.opts
	d.spaceMu.Lock()
	defer d.spaceMu.Unlock()
	if d.spaceAt.IsZero() || time.Since(d.spaceAt) >= o.FreeSpaceRefresh {
		d.spaceAt = time.Now()
		a, c, err := o.FreeSpace(d.path)
		if err != nil {
			d.availBytes, d.capBytes, d.full = -1, 0, false
		} else {
			reserve := o.ReservedBytes
			if reserve == 0 {
				reserve = c / 100
			}
			d.availBytes, d.capBytes = a, c
			wasFull := d.full
			d.full = reserve > 0 && a < reserve
			if d.full && !wasFull {
				o.Logger.Warn("blockstore: data dir is full", "dir", d.path, "available", a, "reserve", reserve)
			}
		}
	}
	return d.availBytes, d.full
}

// usable reports whether new blocks may go to d.
func (fm *FsManager) usable(d *dataDir) bool {
	if d == nil || d.failed.Load() {
		return false
	}
	_, full := fm.space(d)
	return !full
}

// pickTwoLocked chooses among candidates by the power of two choices: of
// two random candidates, the one with fewer tablets; on a tie, the one
// with more free space. Caller holds groups.mu.
func (fm *FsManager) pickTwoLocked(cands []*dataDir) int {
	g := &fm.groups
	if len(cands) == 1 {
		return 0
	}
	i := g.rng.IntN(len(cands))
	j := g.rng.IntN(len(cands) - 1)
	if j >= i {
		j++
	}
	ni, nj := len(g.byDir[cands[i].uuid]), len(g.byDir[cands[j].uuid])
	switch {
	case ni < nj:
		return i
	case nj < ni:
		return j
	}
	ai, _ := fm.space(cands[i])
	aj, _ := fm.space(cands[j])
	if aj > ai {
		return j
	}
	return i
}

// newGroupLocked picks the directories of a new group for tablet.
func (fm *FsManager) newGroupLocked(tablet string) error {
	var cands []*dataDir
	healthy := 0
	for _, d := range fm.dirs {
		if !d.failed.Load() {
			healthy++
		}
		if fm.usable(d) {
			cands = append(cands, d)
		}
	}
	if len(cands) == 0 {
		if healthy == 0 {
			return ErrAllDirsFailed
		}
		return fmt.Errorf("%w: every healthy data dir is below its reserve", ErrNoSpace)
	}
	for n := 0; n < fm.opts.TargetDirsPerTablet && len(cands) > 0; n++ {
		i := fm.pickTwoLocked(cands)
		fm.groups.addLocked(tablet, cands[i].uuid)
		cands = slices.Delete(cands, i, i+1)
	}
	return nil
}

// place picks the directory of a new block: a usable directory of the
// tablet's group (created on first use), the one with more free space of
// two random ones; when all of the group are full, the group grows by one
// directory. Blocks without a tablet go round-robin over usable dirs.
func (fm *FsManager) place(opts CreateBlockOptions) (*dataDir, error) {
	if opts.TabletID == "" {
		n := len(fm.dirs)
		start := int(fm.rr.Add(1) - 1)
		for k := range n {
			if d := fm.dirs[(start+k)%n]; fm.usable(d) {
				return d, nil
			}
		}
		if len(healthyOf(fm.dirs)) == 0 {
			return nil, ErrAllDirsFailed
		}
		return nil, fmt.Errorf("%w: every healthy data dir is below its reserve", ErrNoSpace)
	}
	g := &fm.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.byTablet[opts.TabletID]; !ok {
		if err := fm.newGroupLocked(opts.TabletID); err != nil {
			return nil, fmt.Errorf("blockstore: data dir group of tablet %s: %w", opts.TabletID, err)
		}
	}
	var cands []*dataDir
	anyHealthy := false
	for _, u := range g.byTablet[opts.TabletID] {
		d := fm.byUUID[u]
		if d != nil && !d.failed.Load() {
			anyHealthy = true
		}
		if fm.usable(d) {
			cands = append(cands, d)
		}
	}
	if len(cands) == 0 {
		if !anyHealthy {
			return nil, fmt.Errorf("%w: every directory of tablet %s's group failed", ErrDirFailed, opts.TabletID)
		}
		// All full: extend the group.
		var more []*dataDir
		for _, d := range fm.dirs {
			if !slices.Contains(g.byTablet[opts.TabletID], d.uuid) && fm.usable(d) {
				more = append(more, d)
			}
		}
		if len(more) == 0 {
			return nil, fmt.Errorf("%w: tablet %s", ErrNoSpace, opts.TabletID)
		}
		d := more[fm.pickTwoLocked(more)]
		g.addLocked(opts.TabletID, d.uuid)
		fm.opts.Logger.Info("blockstore: extended full data dir group", "tablet", opts.TabletID, "dir", d.path)
		return d, nil
	}
	if len(cands) == 1 {
		return cands[0], nil
	}
	i := g.rng.IntN(len(cands))
	j := g.rng.IntN(len(cands) - 1)
	if j >= i {
		j++
	}
	ai, _ := fm.space(cands[i])
	aj, _ := fm.space(cands[j])
	if aj > ai {
		return cands[j], nil
	}
	return cands[i], nil
}

// CreateDataDirGroup gives tablet a data dir group (Options.
// TargetDirsPerTablet directories by the power of two choices) and returns
// it in serializable form, for the caller to store with the tablet's
// metadata and pass to LoadDataDirGroup on reopen. A tablet that has a
// group already gets it back unchanged.
func (fm *FsManager) CreateDataDirGroup(tabletID string) (*storagepb.FsDataDirGroup, error) {
	if tabletID == "" {
		return nil, fmt.Errorf("%w: empty tablet id", ErrInvalidArgument)
	}
	g := &fm.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.byTablet[tabletID]; !ok {
		if err := fm.newGroupLocked(tabletID); err != nil {
			return nil, fmt.Errorf("blockstore: data dir group of tablet %s: %w", tabletID, err)
		}
	}
	return &storagepb.FsDataDirGroup{DirUuids: slices.Clone(g.byTablet[tabletID])}, nil
}

// LoadDataDirGroup registers a group stored by the caller (replacing any
// group the tablet has). A UUID outside the store's directory set fails
// with ErrUnknownDir and registers nothing. If a directory of the group
// has failed (or did not open), the group is registered and the error
// wraps ErrDirFailed: the tablet is affected.
func (fm *FsManager) LoadDataDirGroup(tabletID string, group *storagepb.FsDataDirGroup) error {
	us := group.GetDirUuids()
	if tabletID == "" || len(us) == 0 {
		return fmt.Errorf("%w: tablet %q, group of %d dirs", ErrInvalidArgument, tabletID, len(us))
	}
	for _, u := range us {
		if !slices.Contains(fm.known, u) {
			return fmt.Errorf("%w: %s in the group of tablet %s", ErrUnknownDir, u, tabletID)
		}
	}
	g := &fm.groups
	g.mu.Lock()
	g.removeLocked(tabletID)
	var bad []string
	for _, u := range us {
		if slices.Contains(g.byTablet[tabletID], u) {
			continue
		}
		g.addLocked(tabletID, u)
		if d := fm.byUUID[u]; d == nil || d.failed.Load() {
			bad = append(bad, u)
		}
	}
	g.mu.Unlock()
	if len(bad) > 0 {
		return fmt.Errorf("%w: tablet %s: directories %v", ErrDirFailed, tabletID, bad)
	}
	return nil
}

// DataDirGroup returns tablet's current group (it grows when its
// directories fill up: store it again after writes).
func (fm *FsManager) DataDirGroup(tabletID string) (*storagepb.FsDataDirGroup, bool) {
	g := &fm.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	us, ok := g.byTablet[tabletID]
	if !ok {
		return nil, false
	}
	return &storagepb.FsDataDirGroup{DirUuids: slices.Clone(us)}, true
}

// DeleteDataDirGroup forgets tablet's group (the tablet was deleted).
func (fm *FsManager) DeleteDataDirGroup(tabletID string) {
	g := &fm.groups
	g.mu.Lock()
	g.removeLocked(tabletID)
	g.mu.Unlock()
}

// TabletsInDir lists the tablets whose group includes the directory with
// this UUID, sorted.
func (fm *FsManager) TabletsInDir(dirUUID string) []string {
	g := &fm.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.byDir[dirUUID]))
	for t := range g.byDir[dirUUID] {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}
