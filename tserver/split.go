package tserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/storage/checkpoint"
	rp "bighive/storage/replica"
	"bighive/storage/split"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/wal"
)

// Split defaults (Options.Split*).
const (
	defaultSplitThreshold = 512 << 20
	defaultSplitInterval  = 30 * time.Second
	defaultSplitCheck     = time.Second
	defaultMaxSplits      = 2
	// reportSplitTimeout bounds step 6; past it the outcome is unknown.
	reportSplitTimeout = 30 * time.Second
)

var errNotServingSplit = errors.New("tserver: tablet to split is not serving")

// splitter watches the tablets' sizes and runs splits (package split).
type splitter struct {
	s         *Server
	threshold int64 // <0: automatic splits off
	interval  time.Duration
	check     time.Duration
	slots     chan struct{} // bounds the splits running at once
	hook      func(split.Step) error

	mu   sync.Mutex
	last map[string]time.Time // tablet id → start of its last split attempt
	busy map[string]bool      // tablet ids being split
}

func newSplitter(s *Server) *splitter {
	o := s.opts
	sp := &splitter{s: s, threshold: o.SplitThreshold, interval: o.SplitInterval, check: o.SplitCheckInterval,
		hook: o.SplitHook, last: map[string]time.Time{}, busy: map[string]bool{}}
	if sp.threshold == 0 {
		sp.threshold = defaultSplitThreshold
	}
	if sp.interval <= 0 {
		sp.interval = defaultSplitInterval
	}
	if sp.check <= 0 {
		sp.check = defaultSplitCheck
	}
	n := o.MaxConcurrentSplits
	if n <= 0 {
		n = defaultMaxSplits
	}
	sp.slots = make(chan struct{}, n)
	return sp
}

// start runs the size watcher until ctx ends.
func (sp *splitter) start(ctx context.Context) {
	if sp.threshold < 0 {
		return
	}
	sp.s.wg.Add(1)
	go func() {
		defer sp.s.wg.Done()
		t := time.NewTicker(sp.check)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sp.watch(ctx)
		}
	}()
}

// size is a tablet's TSFiles plus its write buffers.
func size(r *rp.Replica) int64 {
	n := r.MemoryUsage()
	for _, f := range r.Files() {
		n += f.Size
	}
	return n
}

// watch starts a split of each tablet over the threshold, unless tablets
// are loading here (recovery), the lease is not valid, the tablet split
// within the interval, or the tserver runs its maximum of splits.
func (sp *splitter) watch(ctx context.Context) {
	s := sp.s
	if !s.lease.Valid(time.Now()) {
		return
	}
	all := s.tablets.all()
	for _, r := range all {
		if !r.Serving() {
			return // a tablet is recovering: no split now
		}
	}
	for _, r := range all {
		if size(r) < sp.threshold || !sp.claim(r.ID(), false) {
			continue
		}
		select {
		case sp.slots <- struct{}{}:
		default:
			sp.release(r.ID())
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-sp.slots }()
			if _, err := sp.run(ctx, r, nil); err != nil && ctx.Err() == nil {
				s.log.Warn("split failed; retried later", "tablet", r.ID(), "err", err)
			}
		}()
	}
}

// claim marks a tablet busy; an automatic split also needs the interval
// since its last attempt to have passed.
func (sp *splitter) claim(id string, admin bool) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.busy[id] || !admin && time.Since(sp.last[id]) < sp.interval {
		return false
	}
	sp.busy[id] = true
	sp.last[id] = time.Now()
	return true
}

func (sp *splitter) release(id string) {
	sp.mu.Lock()
	delete(sp.busy, id)
	sp.mu.Unlock()
}

// run splits r (at row, or the middle row when nil). On success the
// parent is unloaded and the children are loading here.
func (sp *splitter) run(ctx context.Context, r *rp.Replica, row []byte) (_ *split.Result, err error) {
	s := sp.s
	defer sp.release(r.ID())
	if !r.Serving() {
		return nil, errNotServingSplit
	}
	began := time.Now()
	defer func() {
		if err != nil {
			s.metrics.splitFailed.Inc()
		} else {
			since(s.metrics.splits, began)
		}
	}()
	var committed []*pb.TabletMeta
	// The parent's files are read through their stores until split.Run
	// returns (it closes its readers first).
	var releases []func()
	defer func() {
		for _, release := range releases {
			release()
		}
	}()
	opts := split.Options{
		FS: s.fs, Root: s.opts.Root, Blocks: s.blocks, Store: s.uuid, Exclusive: s.eng.coord.Exclusive,
		BeginSplit: s.eng.coord.BeginSplit, Hook: sp.hook, Logger: s.log,
		Checkpoint: s.checkpointFirst,
		OpenFile: func(f tsfile.Info) (*tsfile.Reader, error) {
			store, release, err := s.openStoreFor(f.FooterRef())
			if err != nil {
				return nil, err
			}
			releases = append(releases, release)
			return tsfile.Open(store, f.FooterRef(), tsfile.ReaderOptions{})
		},
		Master: splitMaster{s: s, committed: &committed, parent: r},
	}
	req := split.Request{TabletID: r.ID(), Epoch: r.Epoch(), Start: r.Start(), End: r.End(), Row: row, Tablet: r,
		Route: r.Route, Compression: r.Compression()}
	if len(req.End) == 0 {
		req.End = nil
	}
	res, err := split.Run(ctx, opts, req)
	if errors.Is(err, split.ErrOutcomeUnknown) {
		s.unload(r, "split outcome unknown")
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	s.unload(r, fmt.Sprintf("split into %s and %s", res.Report.Children[0].ID, res.Report.Children[1].ID))
	schema := s.schemaToPB(r)
	assign := make([]*pb.TabletAssignment, 0, len(committed))
	for _, c := range committed {
		assign = append(assign, &pb.TabletAssignment{Tablet: c, Schema: schema})
	}
	s.applyAssignments(s.ctx, assign, nil)
	return res, nil
}

// splitMaster is split.Master over the master's RPCs.
type splitMaster struct {
	s         *Server
	committed *[]*pb.TabletMeta
	parent    *rp.Replica // the load the split was computed for
}

func (m splitMaster) AllocateTabletIDs(ctx context.Context, n int) ([]string, error) {
	var ids []string
	err := m.s.master.Call(ctx, func(ctx context.Context, mc pb.MasterClient) error {
		resp, err := mc.AllocateTabletIds(ctx, &pb.AllocateTabletIdsRequest{Count: uint32(n)})
		if err == nil {
			ids = resp.TabletIds
		}
		return err
	})
	return ids, err
}

func (m splitMaster) ReportSplit(ctx context.Context, rep split.Report) error {
	req := &pb.ReportSplitRequest{ParentTabletId: rep.ParentID, ParentEpoch: rep.Epoch, TserverUuid: m.s.uuid}
	for _, c := range rep.Children {
		req.Children = append(req.Children, &pb.SplitChild{
			TabletId: c.ID, Range: &pb.RowRange{StartRow: c.Start, EndRow: c.End},
			Tsfiles: m.s.tsfileRefs(c.TSFiles), ChildLogs: []string{c.ChildLog},
		})
	}
	ctx, cancel := context.WithTimeout(ctx, reportSplitTimeout)
	defer cancel()
	return m.s.report(ctx, split.ErrRefused, []*rp.Replica{m.parent}, func(ctx context.Context, mc pb.MasterClient) error {
		resp, err := mc.ReportSplit(ctx, req)
		if err == nil {
			*m.committed = resp.Children
		}
		return err
	})
}

// checkpointFirst is the checkpoint a split or merge starts with, so that
// its fence flushes little. The metadata's refusal of other tablets'
// updates (a tablet unloaded meanwhile) does not stop it: the split or
// merge checks its own tablets' buffers and fences its own report.
func (s *Server) checkpointFirst(ctx context.Context) error {
	_, err := s.eng.coord.Checkpoint(ctx)
	if ref := (*checkpoint.RefusedError)(nil); errors.As(err, &ref) {
		s.log.Warn("checkpoint before a split or merge refused some tablets; going on", "err", err)
		return nil
	}
	return err
}

// report sends a split's or a merge's report (fn, one attempt) to the
// master. It returns nil once committed, an error wrapping refused when
// the refusal is definite, and any other error when the outcome is
// unknown. masterconn retries an attempt on another master after a
// transport error, a timeout or a leader change, and a retried attempt
// may follow one that committed with its reply lost. The master answers a
// retried report of a committed split or merge as committed only while
// the result is as the commit left it (meta's splitDone, mergeDone): once
// a child was split or merged again, or the merged tablet moved, the
// retry is refused though the report committed. So a refusal is definite
// only when it answered the first attempt; a refusal of a retried report
// is outcome unknown, and the caller keeps the parents fenced and deletes
// nothing.
//
// The report is fenced like every background commit (docs/design.md,
// 'Fencing background commits'): nothing is sent without a valid lease,
// or when a parent's load (the replica the split or merge was computed
// for) is no longer the registered one; both are definite refusals. The
// parents' loads are held until the answer, so none is unloaded and
// loaded again while its report is in flight; the report ends with the
// lease (its outcome then unknown).
func (s *Server) report(ctx context.Context, refused error, parents []*rp.Replica, fn func(ctx context.Context, mc pb.MasterClient) error) error {
	now := time.Now()
	if !s.leaseValid() {
		return fmt.Errorf("%w: %w", refused, checkpoint.ErrNoLease)
	}
	// Past the lease the master may give the parents to another tserver;
	// an unload waiting for the parents' hold waits no longer than that.
	ctx, cancel := context.WithTimeout(ctx, s.lease.Remaining(now))
	defer cancel()
	for _, p := range parents {
		if p == nil {
			continue
		}
		release, ok := p.Hold()
		if !ok || s.tablets.get(p.ID()) != p {
			if ok {
				release()
			}
			return fmt.Errorf("%w: tablet %s: %w", refused, p.ID(), checkpoint.ErrLoadEnded)
		}
		defer release()
	}
	attempts := 0 // fn's calls: only those can have reached a master
	err := s.master.Call(ctx, func(ctx context.Context, mc pb.MasterClient) error {
		attempts++
		return fn(ctx, mc)
	})
	switch apierr.CodeOf(err) {
	case codes.OK:
		return nil
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound:
		if attempts == 1 {
			return fmt.Errorf("%w: %w", refused, err)
		}
		return fmt.Errorf("report refused at attempt %d, after an attempt that may have committed: %w", attempts, err)
	}
	return err
}

// Split is the admin RPC (also what the master's SplitTablet forwards):
// split a tablet served here, at split_row or its middle row.
func (s *Server) Split(ctx context.Context, req *pb.SplitRequest) (*pb.SplitResponse, error) {
	r, err := s.serving(req.TabletId, 0)
	if err != nil {
		return nil, err
	}
	sp := s.split
	if !sp.claim(r.ID(), true) {
		return nil, apierr.Unavailable("tablet %s is splitting already; retry later", r.ID())
	}
	select {
	case sp.slots <- struct{}{}:
	case <-ctx.Done():
		sp.release(r.ID())
		return nil, ctx.Err()
	}
	defer func() { <-sp.slots }()
	var row []byte
	if len(req.SplitRow) > 0 {
		row = req.SplitRow
	}
	res, err := sp.run(s.ctx, r, row)
	switch {
	case err == nil:
		return &pb.SplitResponse{ChildTabletIds: []string{res.Report.Children[0].ID, res.Report.Children[1].ID}}, nil
	case errors.Is(err, split.ErrBadRow):
		return nil, apierr.Wrap(codes.InvalidArgument, err, "tablet %s", r.ID())
	case errors.Is(err, split.ErrTooSmall), errors.Is(err, split.ErrRefused):
		return nil, apierr.Wrap(codes.FailedPrecondition, err, "tablet %s", r.ID())
	case errors.Is(err, errNotServingSplit):
		return nil, apierr.Tablet(pb.TabletError_NOT_SERVING, r.ID(), r.Epoch(), "tablet %s is not serving on %s", r.ID(), s.addr)
	case errors.Is(err, split.ErrBusy):
		return nil, apierr.Wrap(codes.Unavailable, err, "tserver %s: split tablet %s", s.addr, r.ID())
	case errors.Is(err, split.ErrOutcomeUnknown):
		return nil, apierr.Wrap(codes.Aborted, err, "tserver %s: split of tablet %s may have committed; it is unloaded here, the master's metadata decides", s.addr, r.ID())
	}
	// The parent is intact; a split is not retried by the caller's library
	// but by a later request.
	return nil, apierr.Wrap(codes.Aborted, err, "tserver %s: split tablet %s failed; nothing changed", s.addr, r.ID())
}

// replayChildLogs applies a split child's logs (the writes made
// while its parent split) after its TSFiles opened and its logs replayed.
func (s *Server) replayChildLogs(r *rp.Replica, paths []string) error {
	for _, p := range paths {
		rep, err := wal.ReplayFile(s.fs, filepath.Join(s.opts.Root, p), func(rec *wal.Record) error {
			if rec.TabletID != r.ID() {
				return nil
			}
			return r.Replay(rec)
		})
		if err != nil {
			return fmt.Errorf("tserver: replay child log %s of tablet %s: %w", p, r.ID(), err)
		}
		s.log.Info("child log replayed", "tablet", r.ID(), "path", p, "records", rep.Records, "torn", rep.Torn)
	}
	return nil
}
