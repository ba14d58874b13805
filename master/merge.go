package master

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	"bighive/internal/tlsconf"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// Merge defaults (Config.Merge*).
const (
	// DefaultSplitThreshold is the tservers' default --split-threshold
	// (Config.SplitThreshold).
	DefaultSplitThreshold = 512 << 20
	// DefaultMergeThreshold is the merge threshold when the tservers do
	// not split, ¼ of DefaultSplitThreshold; otherwise the default is ¼
	// of Config.SplitThreshold: two tablets below it merge into one below
	// half the split threshold, so a merged tablet does not split again
	// at once.
	DefaultMergeThreshold = DefaultSplitThreshold / 4
	defaultMergeCheck     = 30 * time.Second
	defaultMergeMinAge    = 10 * time.Minute
	// mergeHold keeps a tablet moved for a merge out of rebalancing.
	mergeHold = time.Minute
	// maxMergesPerPass bounds the merges one automatic pass starts.
	maxMergesPerPass = 8
)

// MergeStep names a point of the master's side of a merge at which
// Config.MergeHook is called: each is a point where the leader holds
// state of the merge that a crash loses (docs/design.md 'Merge').
type MergeStep int

// The master's merge steps.
const (
	// MergeStepMoving: the old owner of a tablet a merge moves stopped
	// serving it; its assignment to the new owner is not yet committed
	// (no tserver serves it).
	MergeStepMoving MergeStep = 1
	// MergeStepRequest: both on one tserver, the merge request about to
	// go to it.
	MergeStepRequest MergeStep = 2
	// MergeStepCommit: a tserver's merge report received, the MetaMerge
	// command not yet proposed.
	MergeStepCommit MergeStep = 3
	// MergeStepCommitted: the MetaMerge command committed, the report not
	// yet answered.
	MergeStepCommitted MergeStep = 4
)

func (s MergeStep) String() string {
	return [...]string{"?", "moving", "request", "commit", "committed"}[max(0, min(int(s), 4))]
}

// mergeHook runs Config.MergeHook at step s.
func (m *Master) mergeHook(s MergeStep) error { return stepHook(m.cfg.MergeHook, "merge: master", s) }

// stepHook runs a testing hook of Config at step s (none when nil); its
// error fails the step, Aborted. what names the protocol in the error.
func stepHook[S interface {
	~int
	fmt.Stringer
}](hook func(S) error, what string, s S) error {
	if hook == nil {
		return nil
	}
	if err := hook(s); err != nil {
		return apierr.Wrap(codes.Aborted, err, "%s step %d (%s)", what, int(s), s)
	}
	return nil
}

// mergeState is the leader's memory of merges: tablets held out of
// rebalancing because a merge moved them together (guarded by
// leaderState.mu).
type mergeState struct {
	held  map[string]time.Time // tablet id → end of the hold
	small map[string]time.Time // tablet id → first pass that saw it small (mergePass only)
	// sizes are the tablets' sizes as last reported while serving: the
	// merger's only sizes (a loading tablet's report may be partial, 0
	// even, and would make any tablet look small).
	sizes map[string]int64
}

// noteReport records a heartbeat's report of a tablet for the merger.
// Call with ls.mu held.
func (ms *mergeState) noteReport(rep *pb.TabletReport) {
	if !rep.Serving {
		return
	}
	if ms.sizes == nil {
		ms.sizes = map[string]int64{}
	}
	ms.sizes[rep.TabletId] = rep.SizeBytes
}

// mergeHeldLocked reports whether rebalancing must leave the tablet where
// a merge put it. Call with ls.mu held.
func (ls *leaderState) mergeHeldLocked(id string, now time.Time) bool {
	return now.Before(ls.merge.held[id])
}

// ReportMerge replaces two tablets by the merged one in one command (merge
// step 5). The merged tablet stays with the reporting tserver (ASSIGNED,
// epoch 1), which loads it at once.
func (m *Master) ReportMerge(ctx context.Context, req *pb.ReportMergeRequest) (*pb.ReportMergeResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if err := m.mergeHook(MergeStepCommit); err != nil {
		return nil, err
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_Merge{Merge: &spb.MetaMerge{Report: req}}})
	if err != nil {
		return nil, err
	}
	if err := m.mergeHook(MergeStepCommitted); err != nil {
		return nil, err
	}
	merged := res.Tablets[0]
	ls.mu.Lock()
	for _, id := range []string{req.LeftTabletId, req.RightTabletId} {
		delete(ls.moves, id)
		delete(ls.sizes, id)
		delete(ls.merge.held, id)
		delete(ls.merge.sizes, id)
	}
	if l := ls.leases[req.TserverUuid]; l != nil {
		l.sentAssign[merged.TabletId] = time.Now() // it loads it already
	}
	ls.mu.Unlock()
	ls.poke()
	m.log.Info("tablets merged", "left", req.LeftTabletId, "right", req.RightTabletId, "merged", merged.TabletId)
	m.events.add("merge", "tablets %s and %s merged into %s", req.LeftTabletId, req.RightTabletId, merged.TabletId)
	return &pb.ReportMergeResponse{Merged: merged}, nil
}

// MergeTablets merges the tablet holding row with the next tablet of the
// table. When the two are on different tservers it moves one to the other
// first and waits (within the call's deadline) until both serve there.
func (m *Master) MergeTablets(ctx context.Context, req *pb.MergeTabletsRequest) (*pb.MergeTabletsResponse, error) {
	if _, err := m.readyRead(); err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	var left, right *pb.TabletMeta
	err := m.view(func(r *meta.Reader) error {
		if _, err := r.Table(req.Table); err != nil {
			return err
		}
		ts, err := r.TableTablets(req.Table, req.Row, 1)
		if err != nil || len(ts) == 0 {
			return err
		}
		left = ts[0]
		if len(left.Range.GetEndRow()) == 0 {
			return nil
		}
		if ts, err = r.TableTablets(req.Table, left.Range.GetEndRow(), 1); err == nil && len(ts) > 0 {
			right = ts[0]
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if left == nil {
		return nil, apierr.NotFound("table %q has no tablets", req.Table)
	}
	if right == nil {
		return nil, apierr.FailedPrecondition("row %q is in tablet %s, the table's last: it has no successor to merge with", req.Row, left.TabletId)
	}
	if req.ExpectLeftTabletId != "" && req.ExpectLeftTabletId != left.TabletId || req.ExpectRightTabletId != "" && req.ExpectRightTabletId != right.TabletId {
		return nil, apierr.FailedPrecondition("row %q is now in tablet %s, followed by %s, not %s and %s: the tablets were merged or split meanwhile",
			req.Row, left.TabletId, right.TabletId, req.ExpectLeftTabletId, req.ExpectRightTabletId)
	}
	for {
		id, err := m.mergeStep(ctx, left.TabletId, right.TabletId)
		if err != nil || id != "" {
			return &pb.MergeTabletsResponse{MergedTabletId: id}, err
		}
		select {
		case <-ctx.Done():
			return nil, apierr.Wrap(codes.DeadlineExceeded, ctx.Err(), "merge of %s and %s: waiting for them to serve on one tserver", left.TabletId, right.TabletId)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// mergeStep takes the merge of two adjacent tablets one step on: when both
// serve on one tserver it asks that tserver to merge them and returns the
// merged id; when they serve on two it starts moving one (unless a move
// runs) and returns "" (call again later). An error means the pair no
// longer exists as it was, or the merge failed.
func (m *Master) mergeStep(ctx context.Context, leftID, rightID string) (string, error) {
	ls, err := m.ready()
	if err != nil {
		return "", err
	}
	var left, right *pb.TabletMeta
	var addr string
	var counts [2]int
	err = m.view(func(r *meta.Reader) (err error) {
		if left, err = r.Tablet(leftID); err != nil {
			return err
		}
		if right, err = r.Tablet(rightID); err != nil {
			return err
		}
		if left.TserverUuid == right.TserverUuid {
			if s, err := r.TServer(left.TserverUuid); err == nil {
				addr = s.Address
			}
			return nil
		}
		counts[0], counts[1] = len(r.TabletIDsOf(left.TserverUuid)), len(r.TabletIDsOf(right.TserverUuid))
		return nil
	})
	if err != nil {
		return "", apierr.Wrap(codes.Aborted, err, "merge of %s and %s: a tablet split, merged or went away; retry", leftID, rightID)
	}
	serving := pb.TabletState_TABLET_STATE_SERVING
	if left.State != serving || right.State != serving {
		return "", nil // loading or moving: later
	}
	if left.TserverUuid != right.TserverUuid {
		ls.startMergeMove(left, right, counts)
		return "", nil
	}
	if ls.moving(leftID, rightID) {
		return "", nil // a rebalancing move is taking one away: later
	}
	if addr == "" {
		return "", apierr.Unavailable("tserver %s of tablets %s and %s has no address", left.TserverUuid, leftID, rightID)
	}
	if err := m.mergeHook(MergeStepRequest); err != nil {
		return "", err
	}
	conn, err := grpc.NewClient(addr, limits.GRPCDialOptions(tlsconf.Credentials(m.cfg.TLS))...)
	if err != nil {
		return "", apierr.Wrap(codes.Unavailable, err, "dial tserver %s", addr)
	}
	defer conn.Close()
	resp, err := pb.NewTServerClient(conn).Merge(ctx, &pb.MergeRequest{LeftTabletId: leftID, RightTabletId: rightID})
	if _, refused := apierr.TabletReason(err); refused || codeOf(err) == codes.ResourceExhausted {
		// A definite refusal before the merge began (a tablet is loading
		// or busy splitting): later.
		return "", nil
	}
	if codeOf(err) == codes.Unavailable || codeOf(err) == codes.DeadlineExceeded || codeOf(err) == codes.Canceled {
		// Not retried as Unavailable: the merge may have committed, and a
		// retry would merge the merged tablet with the next one.
		return "", apierr.Wrap(codes.Aborted, err, "tserver %s did not answer the merge of %s and %s; it may have committed: list the tablets before merging again", addr, leftID, rightID)
	}
	if err != nil {
		return "", err
	}
	return resp.MergedTabletId, nil
}

// moving reports whether a move of either tablet is in flight.
func (ls *leaderState) moving(ids ...string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, id := range ids {
		if ls.moves[id] != nil {
			return true
		}
	}
	return false
}

// startMergeMove moves one of two tablets to the other's tserver: the one
// a merge did not just move there (held; else two pairs sharing a tablet
// would move it to and fro), else the one on the tserver with more
// tablets, so the spread grows least. counts are the owners' tablet counts
// (left's, right's).
func (ls *leaderState) startMergeMove(left, right *pb.TabletMeta, counts [2]int) {
	now := time.Now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	mv, to := right, left.TserverUuid
	heldL, heldR := ls.mergeHeldLocked(left.TabletId, now), ls.mergeHeldLocked(right.TabletId, now)
	if heldL == heldR && counts[0] > counts[1] || heldR && !heldL {
		mv, to = left, right.TserverUuid
	}
	if ls.moves[left.TabletId] != nil || ls.moves[right.TabletId] != nil {
		return
	}
	if l := ls.leases[to]; l == nil || l.dead || ls.expired(l, now) {
		return
	}
	ls.moves[mv.TabletId] = &move{tablet: mv.TabletId, epoch: mv.Epoch, from: mv.TserverUuid, to: to, merge: true}
	ls.noteNewsLocked(mv.TserverUuid)
	if ls.merge.held == nil {
		ls.merge.held = map[string]time.Time{}
	}
	ls.merge.held[left.TabletId] = now.Add(mergeHold)
	ls.merge.held[right.TabletId] = now.Add(mergeHold)
	ls.m.log.Info("merge: moving tablet", "tablet", mv.TabletId, "from", mv.TserverUuid, "to", to)
	ls.m.events.add("move", "tablet %s moving from %s to %s (to merge it)", mv.TabletId, mv.TserverUuid, to)
}

// runMerger runs an automatic merge pass every Config.MergeCheckInterval
// while this master is the ready leader, until Close.
func (m *Master) runMerger() {
	if m.cfg.MergeThreshold < 0 {
		m.wg.Done()
		return
	}
	m.leaderPasses(m.cfg.MergeCheckInterval, m.mergePass)
}

func (m *Master) mergePass(ctx context.Context, ls *leaderState) {
	ls.mu.Lock()
	sizes := make(map[string]int64, len(ls.merge.sizes))
	for id, n := range ls.merge.sizes {
		sizes[id] = n
	}
	moving := make(map[string]bool, len(ls.moves))
	for id := range ls.moves {
		moving[id] = true
	}
	ls.mu.Unlock()
	var tables [][]mergeTablet
	listed := map[string]bool{}
	err := m.view(func(r *meta.Reader) error {
		all, err := r.Tables()
		if err != nil {
			return err
		}
		for _, s := range all {
			ts, err := r.TableTablets(s.Name, nil, 0)
			if err != nil {
				return err
			}
			row := make([]mergeTablet, len(ts))
			for i, t := range ts {
				listed[t.TabletId] = true
				size, ok := sizes[t.TabletId]
				if !ok {
					size = -1
				}
				row[i] = mergeTablet{id: t.TabletId, size: size, serving: t.State == pb.TabletState_TABLET_STATE_SERVING, moving: moving[t.TabletId]}
			}
			tables = append(tables, row)
		}
		return nil
	})
	if err != nil {
		m.log.Warn("automatic merge pass cannot read the metadata", "err", err)
		return
	}
	ls.mu.Lock()
	for id := range sizes {
		if !listed[id] {
			delete(ls.merge.sizes, id) // merged, split or deleted
		}
	}
	ls.mu.Unlock()
	pairs, small := m.cfg.mergePolicy().plan(tables, ls.merge.small, time.Now())
	ls.merge.small = small // only mergePass touches it, one pass at a time
	if len(pairs) > 0 {
		m.log.Debug("automatic merge pass", "pairs", pairs)
	}
	var wg sync.WaitGroup
	for _, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if _, err := m.mergeStep(cctx, p[0], p[1]); err != nil && ctx.Err() == nil {
				m.log.Warn("automatic merge failed; retried later", "left", p[0], "right", p[1], "err", err)
			}
		}()
	}
	wg.Wait()
}
