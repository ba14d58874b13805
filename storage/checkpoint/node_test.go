package checkpoint_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path"
	"sort"
	"sync"
	"testing"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/checkpoint/localmeta"
	"bighive/storage/mutation"
	"bighive/storage/replica"
	"bighive/storage/vfs"
	"bighive/storage/wal"
)

// nodeConfig describes a single-node store: WAL and block store on fs
// under root, the local metadata at metaPath (a real file: bbolt does its
// own I/O).
type nodeConfig struct {
	fs          vfs.FS
	root        string
	metaPath    string
	tablets     int
	opts        checkpoint.Options // MemLimit, compaction settings, hook
	logFileSize int64
	logger      *slog.Logger
}

// node wires WAL, block store, local metadata, tablets and coordinator the
// way a single-node tserver does.
type node struct {
	cfg   nodeConfig
	mgr   blockstore.Manager
	log   *wal.Log
	meta  *localmeta.DB
	coord *checkpoint.Coordinator
	// tabs are the node's tablets, each one replica: what the coordinator
	// checkpoints and compacts is what takes the writes.
	tabs []*replica.Replica
	byID map[string]*replica.Replica
	rep  checkpoint.RecoveryReport
	// orphans deleted by the start-up pass
	orphans int

	tablets func() []checkpoint.Tablet

	stop func()
	wg   sync.WaitGroup
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func tabletID(i int) string { return fmt.Sprintf("t%03d", i) }

func openNode(ctx context.Context, cfg nodeConfig) (*node, error) {
	if cfg.logger == nil {
		cfg.logger = quiet
	}
	if cfg.logFileSize == 0 {
		cfg.logFileSize = 1 << 20 // pre-zeroing 64 MiB files in a MemFS is slow
	}
	n := &node{cfg: cfg, byID: map[string]*replica.Replica{}}
	ok := false
	defer func() {
		if !ok {
			n.close()
		}
	}()
	if err := cfg.fs.MkdirAll(path.Join(cfg.root, "blocks"), 0o755); err != nil {
		return nil, err
	}
	if err := cfg.fs.SyncDir(cfg.root); err != nil {
		return nil, err
	}
	var err error
	n.mgr, _, err = blockstore.Open(blockstore.Options{Dirs: []string{path.Join(cfg.root, "blocks")}, FS: cfg.fs,
		PreallocateStep: 1 << 20, Logger: cfg.logger})
	if err != nil {
		return nil, fmt.Errorf("open block store: %w", err)
	}
	if n.meta, err = localmeta.Open(cfg.metaPath); err != nil {
		return nil, err
	}
	n.log, err = wal.Open(ctx, wal.Options{FS: cfg.fs, Root: cfg.root, Prefix: wal.FormatPrefix("127.0.0.1:7070"),
		FileSize: cfg.logFileSize, Logger: cfg.logger})
	if err != nil {
		return nil, fmt.Errorf("open wal: %w", err)
	}
	recs, err := n.meta.List()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		for i := range cfg.tablets {
			m := checkpoint.TabletMeta{TabletID: tabletID(i), Epoch: 1, LogPositions: []wal.Position{n.log.Position()}}
			if err := n.meta.Create(ctx, m); err != nil {
				return nil, err
			}
			recs = append(recs, m)
		}
	}
	tabs, rep, err := checkpoint.Recover(ctx, checkpoint.RecoverOptions{FS: cfg.fs, Root: cfg.root, Tablets: recs, Logger: cfg.logger,
		Open: func(ctx context.Context, m checkpoint.TabletMeta) (checkpoint.Replayer, error) {
			t, err := openLoad(n.mgr, m, n.log, admitter{n})
			if err != nil {
				return nil, err
			}
			n.tabs = append(n.tabs, t)
			n.byID[t.ID()] = t
			return t, nil
		}})
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	_ = tabs
	n.rep = rep
	for _, t := range n.tabs {
		t.Serve()
	}
	opts := cfg.opts
	opts.Log, opts.Meta, opts.Blocks, opts.Refs, opts.LogGC = n.log, n.meta, n.mgr, n.meta, n.log
	opts.Logger = cfg.logger
	opts.Tablets = func() []checkpoint.Tablet {
		out := make([]checkpoint.Tablet, len(n.tabs))
		for i, t := range n.tabs {
			out[i] = t
		}
		return out
	}
	n.tablets = opts.Tablets
	n.coord = checkpoint.New(opts)
	if n.orphans, err = n.coord.CollectOrphans(ctx, 0); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

// run starts the coordinator's background work.
func (n *node) run() {
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.coord.Run(ctx)
	}()
}

func (n *node) close() {
	if n.stop != nil {
		n.stop()
		n.wg.Wait()
	}
	if n.log != nil {
		n.log.Close()
	}
	for _, t := range n.tabs {
		t.Close()
	}
	if n.mgr != nil {
		n.mgr.Close()
	}
	if n.meta != nil {
		n.meta.Close()
	}
}

// write goes through the tserver's write path (package replica): the
// state lock shared from before the durable WAL append to after the
// buffer apply.
func (n *node) write(ctx context.Context, id string, m *mutation.RowMutation) error {
	return n.byID[id].Write(ctx, m)
}

// admitter admits writes through the node's current coordinator (a test
// may rewire it).
type admitter struct{ n *node }

func (a admitter) AdmitWrite() func() { return a.n.coord.AdmitWrite() }

// checkBlocks fails unless the block store holds exactly the blocks the
// metadata names (after the start-up orphan pass).
func (n *node) checkBlocks(t *testing.T) {
	t.Helper()
	ids, err := n.mgr.AllBlockIDs()
	if err != nil {
		t.Fatal(err)
	}
	refs, err := n.meta.ReferencedBlocks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(refs) {
		t.Errorf("block store holds %d blocks, metadata names %d", len(ids), len(refs))
	}
	for _, id := range ids {
		if _, ok := refs[blockstore.BlockRef{ID: id}]; !ok { // the node's one store is named ""
			t.Errorf("block %s is not named by any tablet", id)
		}
	}
}

// model is the reference: tablet → row → "family:qualifier" → value.
type model map[string]map[string]map[string]string

func (m model) clone() model {
	out := model{}
	for tab, rows := range m {
		out[tab] = map[string]map[string]string{}
		for r, cols := range rows {
			out[tab][r] = maps.Clone(cols)
		}
	}
	return out
}

// apply changes the model as the engine applies mut (timestamps grow, so
// a tombstone hides every current cell of its scope).
func (m model) apply(tab string, mut *mutation.RowMutation) {
	if m[tab] == nil {
		m[tab] = map[string]map[string]string{}
	}
	row := m[tab][string(mut.Row)]
	if row == nil {
		row = map[string]string{}
		m[tab][string(mut.Row)] = row
	}
	for _, op := range mut.Ops {
		switch op.Kind {
		case mutation.SetCell:
			row[op.Family+":"+string(op.Qualifier)] = string(op.Value)
		case mutation.DeleteColumn:
			delete(row, op.Family+":"+string(op.Qualifier))
		case mutation.DeleteFamily:
			for c := range row {
				if len(c) > len(op.Family) && c[:len(op.Family)+1] == op.Family+":" {
					delete(row, c)
				}
			}
		case mutation.DeleteRow:
			clear(row)
		}
	}
}

// gen makes random row mutations with growing timestamps.
type gen struct {
	rnd   *rand.Rand
	ts    int64
	rows  int
	vsize int
}

var columns = [][2]string{{"f", "a"}, {"f", "b"}, {"g", "c"}}

func (g *gen) next() *mutation.RowMutation {
	g.ts++
	row := []byte(fmt.Sprintf("row%05d", g.rnd.IntN(g.rows)))
	m := &mutation.RowMutation{Row: row}
	switch k := g.rnd.IntN(100); {
	case k < 80:
		nops := 1 + g.rnd.IntN(2)
		for range nops {
			c := columns[g.rnd.IntN(len(columns))]
			v := fmt.Sprintf("v%d-", g.ts)
			for len(v) < g.vsize {
				v += "x"
			}
			m.Ops = append(m.Ops, mutation.Op{Kind: mutation.SetCell, Family: c[0], Qualifier: []byte(c[1]), Timestamp: g.ts, Value: []byte(v)})
		}
	case k < 90:
		c := columns[g.rnd.IntN(len(columns))]
		m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteColumn, Family: c[0], Qualifier: []byte(c[1]), End: g.ts + 1})
	case k < 95:
		m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteFamily, Family: "f", Timestamp: g.ts})
	default:
		m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteRow, Timestamp: g.ts})
	}
	return m
}

// verify fails unless every tablet of n reads exactly what want holds.
func verify(t *testing.T, n *node, want model) {
	t.Helper()
	bad := 0
	tabs := make([]string, 0, len(want))
	for tab := range want {
		tabs = append(tabs, tab)
	}
	sort.Strings(tabs)
	for _, tab := range tabs {
		tt := n.byID[tab]
		if tt == nil {
			t.Fatalf("tablet %s missing after recovery", tab)
		}
		for row, cols := range want[tab] {
			got, err := readRow(tt, []byte(row))
			if err != nil {
				t.Fatalf("read %s/%s: %v", tab, row, err)
			}
			if !maps.Equal(got, cols) && !(len(got) == 0 && len(cols) == 0) {
				if bad++; bad <= 5 {
					t.Errorf("%s/%s = %v, want %v", tab, row, got, cols)
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d rows differ", bad)
	}
}
