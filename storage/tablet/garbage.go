package tablet

import (
	"fmt"
	"strings"
	"sync"

	"bighive/storage/tablet/tsfile"
)

// GarbageEstimate is what a major compaction of all the tablet's TSFiles
// would drop, estimated from their footers and bloom filters without
// reading a data page (EstimateGarbage).
type GarbageEstimate struct {
	// Entries is the number of entries in the files.
	Entries int64
	// Tombstones is the number of tombstones in them (files of format
	// version 4 on; older files count none): a major compaction of every
	// file purges them all.
	Tombstones int64
	// Cells is the estimated number of cells it drops: covered by a newer
	// row tombstone, beyond max versions or past max age under the GC
	// rule, or of a family no longer in the schema.
	Cells float64
}

// Share is the estimated share of the entries a major compaction drops,
// tombstones and cells together (0 without entries).
func (g GarbageEstimate) Share() float64 {
	if g.Entries == 0 {
		return 0
	}
	return min(1, (float64(g.Tombstones)+g.Cells)/float64(g.Entries))
}

// garbageSamples is the sample cache of EstimateGarbage.
type garbageSamples struct {
	mu  sync.Mutex
	key string
	per [][]rowSample // per file of the set named by key, newest first
}

// rowSample is one sampled row of a file: newer is the number of newer
// files that may hold the row (its bloom filter says so), covered the
// chance that one of them deleted it.
type rowSample struct {
	newer   int
	covered float64
}

// samplesPerFile bounds the rows sampled of each file (from its index).
const samplesPerFile = 64

// tsSteps is the number of timestamps a family's cell range is sampled at
// when a max-age rule is evaluated.
const tsSteps = 16

// EstimateGarbage estimates what a major compaction would drop now. For
// each file and family it takes the cells' version ranks in the file
// (FamilyStats.Beyond) and their timestamps spread evenly over the
// family's range, and shifts the ranks by the number of newer files that
// hold the row, found by probing the newer files' bloom filters with a
// sample of the file's rows (SampleRows). A sampled row counts as deleted
// with the share of a newer file's rows that it deleted. The GC rule,
// nested unions and intersections included, is evaluated on that
// distribution. Cells of families not in the schema all count. The row
// sample of a file set is computed once and cached; the rule is evaluated
// at each call, so cells that age past a max age are counted as they do.
func (t *Tablet) EstimateGarbage() (GarbageEstimate, error) {
	t.mu.RLock()
	files := append([]*file(nil), t.files...)
	schema := t.schema
	for _, f := range files {
		f.acquire()
	}
	t.mu.RUnlock()
	defer func() {
		for _, f := range files {
			f.release()
		}
	}()
	per, err := t.samples(files)
	if err != nil {
		return GarbageEstimate{}, err
	}
	now := t.opts.Now().UnixMicro()
	var g GarbageEstimate
	for i, f := range files {
		g.Entries += f.info.Entries
		g.Tombstones += f.info.Tombstones
		for j := range f.info.Families {
			fs := &f.info.Families[j]
			if fs.Family == "" {
				continue
			}
			cells := fs.Cells
			if !f.info.Counted {
				cells = fs.Entries
			}
			pol, ok := schema.Families[fs.Family]
			if !ok {
				g.Cells += float64(cells)
				continue
			}
			g.Cells += float64(cells) * familyGarbage(&pol, fs, f.info, per[i], now)
		}
	}
	return g, nil
}

// samples returns the row samples of files (newest first), from the cache
// when the set is the one last sampled.
func (t *Tablet) samples(files []*file) ([][]rowSample, error) {
	var key strings.Builder
	for _, f := range files {
		fmt.Fprintf(&key, "%s/%d,", f.info.Store, f.info.Footer)
	}
	c := &t.garbage
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == key.String() && c.per != nil {
		return c.per, nil
	}
	// deleted[i] is the share of file i's rows that it deletes.
	deleted := make([]float64, len(files))
	for i, f := range files {
		for _, fs := range f.info.Families {
			if fs.Family == "" && f.info.Rows > 0 {
				deleted[i] = min(1, float64(fs.Entries)/float64(f.info.Rows))
			}
		}
	}
	per := make([][]rowSample, len(files))
	for i, f := range files {
		rows, err := f.r.SampleRows(samplesPerFile)
		if err != nil {
			return nil, fmt.Errorf("tablet %s: sample TSFile %s: %w", t.opts.ID, f.info.FooterRef(), err)
		}
		for _, row := range rows {
			s := rowSample{}
			kept := 1.0
			for j := 0; j < i; j++ {
				ok, err := files[j].r.MayContainRow(row)
				if err != nil {
					return nil, fmt.Errorf("tablet %s: bloom filter of TSFile %s: %w", t.opts.ID, files[j].info.FooterRef(), err)
				}
				if ok {
					s.newer++
					kept *= 1 - deleted[j]
				}
			}
			s.covered = 1 - kept
			per[i] = append(per[i], s)
		}
	}
	c.key, c.per = key.String(), per
	return per, nil
}

// familyGarbage is the estimated share of a family's cells in one file
// that a major compaction drops (see EstimateGarbage).
func familyGarbage(pol *FamilyPolicy, fs *tsfile.FamilyStats, info tsfile.Info, samples []rowSample, now int64) float64 {
	cells := fs.Cells
	lo, hi := fs.MinCellTimestamp, fs.MaxCellTimestamp
	// byRank[r] is the number of cells of rank r+1 in the file; the last
	// holds every rank above MaxRanks.
	var byRank [tsfile.MaxRanks + 1]int64
	if info.Counted {
		byRank[0] = cells - fs.Beyond[0]
		for r := 1; r < tsfile.MaxRanks; r++ {
			byRank[r] = fs.Beyond[r-1] - fs.Beyond[r]
		}
		byRank[tsfile.MaxRanks] = fs.Beyond[tsfile.MaxRanks-1]
	} else {
		// An older file has no counts: every cell is taken as the newest
		// of its column there, over the file's timestamp range.
		cells = fs.Entries
		byRank[0] = cells
		lo, hi = info.MinTimestamp, info.MaxTimestamp
	}
	if cells == 0 {
		return 0
	}
	// atShift is the share of the cells that are garbage when newer files
	// hold shift versions of their column.
	atShift := func(shift int) float64 {
		var g float64
		for r, n := range byRank {
			if n == 0 {
				continue
			}
			var hits int
			for s := range tsSteps {
				ts := lo + int64((float64(s)+0.5)/tsSteps*float64(hi-lo))
				if pol.garbage(r+1+shift, ts, now) {
					hits++
				}
			}
			g += float64(n) / float64(cells) * float64(hits) / tsSteps
		}
		return g
	}
	if len(samples) == 0 {
		return atShift(0)
	}
	memo := map[int]float64{}
	var sum float64
	for _, s := range samples {
		g, ok := memo[s.newer]
		if !ok {
			g = atShift(s.newer)
			memo[s.newer] = g
		}
		sum += s.covered + (1-s.covered)*g
	}
	return sum / float64(len(samples))
}

// GarbageShare is EstimateGarbage's share (checkpoint.GarbageEstimator).
func (t *Tablet) GarbageShare() (float64, error) {
	g, err := t.EstimateGarbage()
	return g.Share(), err
}
