package checkpoint_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
)

// sharedRefs is the node's References plus SharedFiles: every footer asked
// about is shared when shared is set; err fails the question.
type sharedRefs struct {
	checkpoint.References
	shared bool
	err    error
	asked  []blockstore.BlockID
}

func (s *sharedRefs) SharedFiles(_ context.Context, footers []blockstore.BlockID) (map[blockstore.BlockID]bool, error) {
	s.asked = append(s.asked, footers...)
	if s.err != nil {
		return nil, s.err
	}
	out := map[blockstore.BlockID]bool{}
	for _, f := range footers {
		out[f] = s.shared
	}
	return out, nil
}

// TestCompactionKeepsSharedFiles: a compaction's replaced files are deleted
// by the compacting tserver only when the metadata says no backup (or table
// restored from one) names them; shared ones, and all of them when the
// question fails, are left to the orphan pass (docs/design.md 'Backups').
func TestCompactionKeepsSharedFiles(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		shared     bool
		err        error
		wantDelete bool
	}{
		{"not shared", false, nil, true},
		{"shared by a backup", true, nil, false},
		{"no answer", false, errors.New("test: master unreachable"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs := &sharedRefs{shared: tc.shared, err: tc.err}
			n, want, _, _ := fenceNode(t, seed, checkpoint.Options{})
			refs.References = n.meta
			opts := checkpoint.Options{Log: n.log, Meta: n.meta, Blocks: n.mgr, Refs: refs, LogGC: n.log, Tablets: n.tablets, Logger: quiet, MaxTSFiles: -1}
			n.coord = checkpoint.New(opts)
			id := tabletID(0)
			e := n.byID[id]
			before := e.Files()
			if err := n.coord.Compact(ctx, e, true); err != nil {
				t.Fatal(err)
			}
			var footers []blockstore.BlockID
			for _, f := range before {
				footers = append(footers, f.Footer)
			}
			slices.Sort(footers)
			slices.Sort(refs.asked)
			if !slices.Equal(refs.asked, footers) {
				t.Fatalf("asked about %v, want the replaced files' footers %v", refs.asked, footers)
			}
			missing := missingBlocks(t, n, before)
			if tc.wantDelete && len(missing) != blockCount(before) {
				t.Fatalf("%d of %d replaced blocks deleted, want all", len(missing), blockCount(before))
			}
			if !tc.wantDelete && len(missing) != 0 {
				t.Fatalf("a compaction deleted %d blocks of files a backup may name", len(missing))
			}
			verify(t, n, want)
		})
	}
}

// TestCheckpointCovered: a checkpoint lists the tablets whose committed
// files now hold everything written before it, the backup's cut.
func TestCheckpointCovered(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	n, want, _, g := fenceNode(t, seed, checkpoint.Options{})
	writeN(t, n, g, want, 20, 1)
	res, err := n.coord.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Covered, []string{tabletID(0)}) {
		t.Fatalf("covered %v, want the written tablet", res.Covered)
	}
	// Nothing written since: the tablet is covered again (its buffer is empty).
	if res, err = n.coord.Checkpoint(context.Background()); err != nil || !slices.Equal(res.Covered, []string{tabletID(0)}) {
		t.Fatalf("empty checkpoint covered %v (%v), want the tablet", res.Covered, err)
	}
}
