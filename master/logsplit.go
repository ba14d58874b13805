package master

import (
	"context"
	"slices"
	"time"

	"bighive/internal/apierr"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
	"bighive/wal"
)

// Log splitting (issue 10; docs/design.md 'Log splitting'): recovering b
// tablets from a dead log of m bytes would read m × b bytes if every new
// owner read the whole log. So before an UNASSIGNED tablet whose metadata lists a log position
// is assigned again, the leader has the logs of that position's prefix
// split by tablet, so the dead log is read once in total and each new
// owner replays only its tablets' share.
//
//   - Plan: for a prefix P, every UNASSIGNED tablet listing a position of P
//     joins one plan. The files of P from the oldest such position on are
//     cut into ranges (wal.SplitRange) at every tablet's position of P and
//     at even time steps (one range per live tserver), so every file lies
//     in exactly one range and a tablet wants all of a range or none of it.
//     Each range is one task, handed round-robin to live tservers in
//     heartbeat replies (HeartbeatResponse.log_split_tasks).
//   - A tserver reads its range's files once, writes one recovery file per
//     tablet and answers ReportLogSplit. When every task of the plan has
//     answered, one MetaLogSplitDone command replaces those tablets' positions
//     of P by their recovery files; only then are they assigned.
//   - Plans live in the leader's memory. A new leader re-plans from the
//     metadata (the tablets are still UNASSIGNED with their positions), so
//     a master failover during a recovery finishes it; reports of the old
//     leader's tasks are refused and their files left behind.
//   - Fallback: a plan not finished within logSplitTimeout is dropped and
//     its tablets are assigned with their positions unchanged (the new owner
//     replays the whole log).
//   - Recovery files a checkpoint stopped naming (meta's recoverygc list)
//     are deleted by live tservers ("delete/..." tasks), then removed from
//     the list.

const (
	logSplitTimeout = 10 * time.Second
	// logSplitResend: a task not reported is sent again this often (the
	// tserver ignores a task it is running), or at once to another live
	// tserver if its tserver is no longer live.
	logSplitResend = 3 * time.Second
	// justSplit: a tablet of a finished plan that still lists a position
	// of the prefix is not planned again for this long, since the leader's
	// tick may have read the metadata before the plan's command.
	justSplit = 2 * time.Second
	// Recovery file garbage collection.
	recoveryGCEvery  = 2 * time.Second
	recoveryGCBatch  = 64
	recoveryGCResend = 5 * time.Second
)

// splitPlan splits one prefix for a set of tablets.
type splitPlan struct {
	prefix     string
	began      time.Time
	tablets    map[string]*splitTablet
	tasks      map[string]*splitTask
	pending    int  // tasks not reported
	committing bool // the MetaLogSplitDone command is in flight
	bytesRead  int64
}

type splitTablet struct {
	epoch int64
	from  int64 // its oldest position of the prefix
	files []string
}

type splitTask struct {
	pb   *pb.LogSplitTask
	to   string // tserver uuid
	sent time.Time
	done bool
}

// logSplits is the leader's log-split state; leaderState.mu guards it.
type logSplits struct {
	plans    map[string]*splitPlan    // by prefix
	fallback map[string]int64         // tablet id → epoch assigned without a split
	finished map[string]finishedSplit // tablet id → its plan's commit
	next     int                      // round-robin start

	gc     map[string]time.Time // recovery file → when its delete task went out
	lastGC time.Time
}

type finishedSplit struct {
	prefix string
	at     time.Time
}

func newLogSplits() logSplits {
	return logSplits{plans: map[string]*splitPlan{}, fallback: map[string]int64{}, finished: map[string]finishedSplit{},
		gc: map[string]time.Time{}}
}

// holdForSplitLocked plans log splits for the unassigned tablets and
// returns the ones that must not be assigned yet. live is sorted.
func (ls *leaderState) holdForSplitLocked(now time.Time, live []string, unassigned []*pb.TabletMeta) map[string]bool {
	sp := &ls.splits
	for prefix, p := range sp.plans {
		if !p.committing && now.Sub(p.began) > logSplitTimeout {
			ls.m.log.Warn("log split timed out; assigning with whole-log replay", "prefix", prefix,
				"tablets", len(p.tablets), "tasks_left", p.pending, "after", now.Sub(p.began))
			for id, t := range p.tablets {
				sp.fallback[id] = t.epoch
			}
			delete(sp.plans, prefix)
		}
	}
	for id, f := range sp.finished {
		if now.Sub(f.at) > justSplit {
			delete(sp.finished, id)
		}
	}
	held := map[string]bool{}
	need := map[string][]*pb.TabletMeta{}
	for _, t := range unassigned {
		if ep, ok := sp.fallback[t.TabletId]; ok {
			if ep == t.Epoch {
				continue
			}
			delete(sp.fallback, t.TabletId)
		}
		if f, ok := sp.finished[t.TabletId]; ok {
			if slices.ContainsFunc(t.LogPositions, func(p *pb.LogPosition) bool { return p.Prefix == f.prefix }) {
				held[t.TabletId] = true // read before the split's command
				continue
			}
			delete(sp.finished, t.TabletId)
		}
		for _, pos := range t.LogPositions {
			held[t.TabletId] = true
			p := sp.plans[pos.Prefix]
			if p == nil {
				if !slices.Contains(need[pos.Prefix], t) {
					need[pos.Prefix] = append(need[pos.Prefix], t)
				}
			}
		}
	}
	for prefix, tabs := range need {
		if _, err := wal.ParsePrefix(prefix); err != nil {
			for _, t := range tabs {
				sp.fallback[t.TabletId] = t.Epoch
				delete(held, t.TabletId)
			}
			continue
		}
		p := ls.planSplitLocked(prefix, tabs, live, now)
		sp.plans[prefix] = p
		ls.m.log.Info("log split planned", "prefix", prefix, "tablets", len(p.tablets), "tasks", len(p.tasks))
	}
	// Tasks of tservers that are gone go to live ones.
	for _, p := range sp.plans {
		for _, task := range p.tasks {
			if !task.done && len(live) > 0 && !slices.Contains(live, task.to) {
				task.to = live[sp.next%len(live)]
				sp.next++
				task.sent = time.Time{}
			}
		}
	}
	return held
}

// planSplitLocked cuts the files of prefix from the tablets' oldest
// position on into tasks.
func (ls *leaderState) planSplitLocked(prefix string, tabs []*pb.TabletMeta, live []string, now time.Time) *splitPlan {
	p := &splitPlan{prefix: prefix, began: now, tablets: map[string]*splitTablet{}, tasks: map[string]*splitTask{}}
	var cuts []int64
	for _, t := range tabs {
		from, _ := meta.OldestPosition(t, prefix)
		p.tablets[t.TabletId] = &splitTablet{epoch: t.Epoch, from: from}
		cuts = append(cuts, from)
	}
	slices.Sort(cuts)
	lo, hi := cuts[0], now.UnixMicro()
	if n := int64(len(live)); n > 1 && hi > lo {
		for i := int64(1); i < n; i++ {
			cuts = append(cuts, lo+(hi-lo)*i/n)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	for i, from := range cuts {
		until := int64(wal.Unbounded)
		if i+1 < len(cuts) {
			until = cuts[i+1]
		}
		r := wal.SplitRange{Prefix: prefix, From: from, Until: until}
		task := &pb.LogSplitTask{TaskId: wal.SplitTaskID(r), File: &pb.LogPosition{Prefix: prefix, FileTimestamp: from}}
		for id, t := range p.tablets {
			if t.from <= from {
				task.TabletIds = append(task.TabletIds, id)
			}
		}
		slices.Sort(task.TabletIds)
		to := ""
		if len(live) > 0 {
			to = live[ls.splits.next%len(live)]
			ls.splits.next++
		}
		p.tasks[task.TaskId] = &splitTask{pb: task, to: to}
		p.pending++
	}
	return p
}

// splitTasksForLocked returns the tasks to send to tserver in a heartbeat
// reply: its log-split tasks not reported, not sent recently, and some
// recovery files to delete.
func (ls *leaderState) splitTasksForLocked(tserver string, now time.Time) []*pb.LogSplitTask {
	var out []*pb.LogSplitTask
	for _, p := range ls.splits.plans {
		for _, task := range p.tasks {
			if task.to == tserver && !task.done && now.Sub(task.sent) >= logSplitResend {
				task.sent = now
				out = append(out, task.pb)
			}
		}
	}
	n := 0
	for path, sent := range ls.splits.gc {
		if n >= recoveryGCBatch {
			break
		}
		if now.Sub(sent) >= recoveryGCResend {
			ls.splits.gc[path] = now
			out = append(out, &pb.LogSplitTask{TaskId: wal.DeleteTaskID(path)})
			n++
		}
	}
	return out
}

// collectRecoveryGarbage queues recovery files no tablet names for
// deletion (at most every recoveryGCEvery).
func (ls *leaderState) collectRecoveryGarbage(now time.Time) {
	ls.mu.Lock()
	due := now.Sub(ls.splits.lastGC) >= recoveryGCEvery && len(ls.splits.gc) == 0
	if due {
		ls.splits.lastGC = now
	}
	ls.mu.Unlock()
	if !due {
		return
	}
	var garbage []string
	err := ls.m.view(func(r *meta.Reader) error {
		candidates := r.RecoveryGarbage(recoveryGCBatch)
		if len(candidates) == 0 {
			return nil
		}
		inUse, err := r.RecoveryFilesInUse()
		if err != nil {
			return err
		}
		for _, c := range candidates {
			if !inUse[c] {
				garbage = append(garbage, c)
			}
		}
		return nil
	})
	if err != nil {
		ls.m.log.Warn("reading recovery garbage failed", "err", err)
		return
	}
	ls.mu.Lock()
	for _, g := range garbage {
		if _, ok := ls.splits.gc[g]; !ok {
			ls.splits.gc[g] = time.Time{}
		}
	}
	ls.mu.Unlock()
}

// ReportLogSplit records a finished log-split task; when every task of its
// plan is done, one command hands the recovery files to the tablets, which
// are then assigned. A delete task's report removes the file from the
// garbage list.
func (m *Master) ReportLogSplit(ctx context.Context, req *pb.ReportLogSplitRequest) (*pb.ReportLogSplitResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	split, del, err := wal.ParseTaskID(req.TaskId)
	if err != nil {
		return nil, apierr.InvalidArgument("log split report: %v", err)
	}
	if del != "" {
		if _, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_RecoveryFilesDeleted{
			RecoveryFilesDeleted: &spb.MetaRecoveryFilesDeleted{Paths: []string{del}}}}); err != nil {
			return nil, err
		}
		ls.mu.Lock()
		delete(ls.splits.gc, del)
		ls.mu.Unlock()
		return &pb.ReportLogSplitResponse{}, nil
	}
	ls.mu.Lock()
	p := ls.splits.plans[split.Prefix]
	var task *splitTask
	if p != nil {
		task = p.tasks[req.TaskId]
	}
	if task == nil {
		ls.mu.Unlock()
		return nil, apierr.FailedPrecondition("log split task %s is not running (finished, timed out, or planned by an earlier leader)", req.TaskId)
	}
	if !task.done {
		task.done = true
		p.pending--
		p.bytesRead += req.BytesRead
		for tab, f := range req.RecoveryFiles {
			if t := p.tablets[tab]; t != nil && slices.Contains(task.pb.TabletIds, tab) {
				t.files = append(t.files, f)
			}
		}
	}
	if p.pending > 0 || p.committing {
		ls.mu.Unlock()
		return &pb.ReportLogSplitResponse{}, nil
	}
	p.committing = true
	cmd := &spb.MetaLogSplitDone{Prefix: p.prefix}
	files := 0
	for id, t := range p.tablets {
		cmd.Items = append(cmd.Items, &spb.MetaLogSplitDone_Item{TabletId: id, ExpectedEpoch: t.epoch, FromFileTimestamp: t.from, RecoveryFiles: t.files})
		files += len(t.files)
	}
	slices.SortFunc(cmd.Items, func(a, b *spb.MetaLogSplitDone_Item) int { return cmpString(a.TabletId, b.TabletId) })
	ls.mu.Unlock()

	res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_LogSplitDone{LogSplitDone: cmd}})
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err != nil {
		p.committing = false // retried by no one: the plan times out into the fallback
		m.log.Warn("committing a log split failed", "prefix", p.prefix, "err", err)
		return nil, err
	}
	now := time.Now()
	for id := range p.tablets {
		ls.splits.finished[id] = finishedSplit{prefix: p.prefix, at: now}
	}
	if ls.splits.plans[p.prefix] == p {
		delete(ls.splits.plans, p.prefix)
	}
	m.events.add("recovery", "log split of %s done: %d tablets, %d tasks, took %s", p.prefix, len(p.tablets), len(p.tasks),
		now.Sub(p.began).Round(time.Millisecond))
	m.log.Info("log split done", "prefix", p.prefix, "tablets", len(p.tablets), "applied", res.Applied, "tasks", len(p.tasks),
		"recovery_files", files, "bytes_read", p.bytesRead, "took", now.Sub(p.began))
	ls.poke()
	return &pb.ReportLogSplitResponse{}, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
