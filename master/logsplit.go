package master

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"bighive/internal/apierr"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
	"bighive/storage/wal"
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
//     at splitSlices-1 even time steps, so every file lies in exactly one
//     range and a tablet wants all of a range or none of it. Each range is
//     one task listing the tablets whose position is at or before it. A
//     position names a file of P, so a plan has at most (files of P from
//     the oldest position) + splitSlices - 1 tasks, whatever the number of
//     live tservers (issue 21: it used to cut one task per live tserver,
//     ~100 000 tasks for 100 dead tservers among 1 000).
//   - Every prefix that needs a plan in one tick joins one group: the
//     plans of tservers that died together are planned together and
//     committed together. A task goes to the live tserver with the fewest
//     unfinished tasks (ties in rotating order); a heartbeat reply carries
//     every task of its tserver not sent within logSplitResend.
//   - A tserver reads its range's files once, writes one recovery file per
//     tablet and answers ReportLogSplit. When every task of a group has
//     answered, the leader's next tick commits one MetaLogSplitsDone
//     command for all its prefixes, replacing those tablets' positions of
//     each prefix by their recovery files, and assigns them in the same
//     tick. A failed commit is retried by the next tick.
//   - A task whose tserver is no longer live goes at once to another live
//     tserver (the least loaded), so a splitter dying costs one resend.
//   - Plans live in the leader's memory. A new leader re-plans from the
//     metadata (the tablets are still UNASSIGNED with their positions), so
//     a master failover during a recovery finishes it; reports of the old
//     leader's tasks are refused and their files left behind.
//   - Fallback: a group not committed within logSplitTimeout plus
//     logSplitPerTablet per tablet (the recovery files) is dropped and
//     its tablets are assigned with their positions unchanged (the new owner
//     replays the whole log).
//   - Recovery files a checkpoint stopped naming (meta's recoverygc list)
//     are deleted by live tservers ("delete/..." tasks), then removed from
//     the list.

const (
	logSplitTimeout = 10 * time.Second
	// logSplitPerTablet is added to logSplitTimeout for every tablet of a
	// group: a split writes one recovery file (create, fsync, rename) per
	// tablet, which took 9.2 s for 10 000 tablets on the shared test
	// machine (issue 21), and the fallback then made every one of the
	// 10 000 new owners replay the whole dead log.
	logSplitPerTablet = 2 * time.Millisecond
	// logSplitResend: a task not reported is sent again this often (the
	// tserver ignores a task it is running), or at once to another live
	// tserver if its tserver is no longer live.
	logSplitResend = 3 * time.Second
	// splitSlices: besides the tablets' positions, a plan cuts the span
	// from the oldest position to now into this many even time steps, so
	// a long log is read by up to this many tservers in parallel (and no
	// task holds more than its slice's records in memory).
	splitSlices = 4
	// Recovery file garbage collection.
	recoveryGCEvery  = 2 * time.Second
	recoveryGCBatch  = 64
	recoveryGCResend = 5 * time.Second
)

// splitGroup is the plans of one tick, committed together.
type splitGroup struct {
	began      time.Time
	plans      []*splitPlan
	pending    int  // tasks not reported, over all plans
	tasks      int  // tasks, over all plans
	committing bool // the MetaLogSplitsDone command is in flight
}

// timeout is how long g may take before its tablets fall back to
// whole-log replay: logSplitTimeout plus logSplitPerTablet per tablet.
func (g *splitGroup) timeout() time.Duration {
	n := 0
	for _, p := range g.plans {
		n += len(p.tablets)
	}
	return logSplitTimeout + time.Duration(n)*logSplitPerTablet
}

// splitPlan splits one prefix for a set of tablets.
type splitPlan struct {
	prefix    string
	group     *splitGroup
	tablets   map[string]*splitTablet
	tasks     map[string]*splitTask
	bytesRead int64
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
	plans    map[string]*splitPlan // by prefix
	groups   []*splitGroup
	fallback map[string]int64 // tablet id → epoch assigned without a split
	next     int              // rotates the choice among equally loaded tservers

	gc     map[string]time.Time // recovery file → when its delete task went out
	lastGC time.Time
}

func newLogSplits() logSplits {
	return logSplits{plans: map[string]*splitPlan{}, fallback: map[string]int64{}, gc: map[string]time.Time{}}
}

// holdForSplitLocked plans log splits for the unassigned tablets and
// returns the ones that must not be assigned yet. live is sorted.
func (ls *leaderState) holdForSplitLocked(now time.Time, live []string, unassigned []*pb.TabletMeta) map[string]bool {
	sp := &ls.splits
	sp.groups = slices.DeleteFunc(sp.groups, func(g *splitGroup) bool {
		if g.committing || now.Sub(g.began) <= g.timeout() {
			return false
		}
		for _, p := range g.plans {
			ls.m.log.Warn("log split timed out; assigning with whole-log replay", "prefix", p.prefix,
				"tablets", len(p.tablets), "group_tasks_left", g.pending, "after", now.Sub(g.began))
			for id, t := range p.tablets {
				sp.fallback[id] = t.epoch
			}
			delete(sp.plans, p.prefix)
		}
		return true
	})
	held := map[string]bool{}
	need := map[string][]*pb.TabletMeta{}
	for _, t := range unassigned {
		if ep, ok := sp.fallback[t.TabletId]; ok {
			if ep == t.Epoch {
				continue
			}
			delete(sp.fallback, t.TabletId)
		}
		for _, pos := range t.LogPositions {
			held[t.TabletId] = true
			// A tablet may list two positions of a prefix: join once (the
			// last one added is this tablet's, if any; a scan of the list
			// was quadratic in the dead tserver's tablets).
			if n := need[pos.Prefix]; sp.plans[pos.Prefix] == nil && (len(n) == 0 || n[len(n)-1] != t) {
				need[pos.Prefix] = append(need[pos.Prefix], t)
			}
		}
	}
	load := ls.splitLoadLocked(live)
	var g *splitGroup
	for _, prefix := range slices.Sorted(maps.Keys(need)) {
		tabs := need[prefix]
		if _, err := wal.ParsePrefix(prefix); err != nil {
			for _, t := range tabs {
				sp.fallback[t.TabletId] = t.Epoch
				delete(held, t.TabletId)
			}
			continue
		}
		if g == nil {
			g = &splitGroup{began: now}
			sp.groups = append(sp.groups, g)
		}
		p := ls.planSplitLocked(prefix, tabs, live, load, now)
		p.group = g
		g.plans = append(g.plans, p)
		g.pending += len(p.tasks)
		g.tasks += len(p.tasks)
		sp.plans[prefix] = p
	}
	if g != nil {
		ls.m.log.Info("log split planned", "prefixes", len(g.plans), "tasks", g.tasks, "live_tservers", len(live))
	}
	// Tasks of tservers that are gone go to live ones (load's keys are
	// the live tservers).
	for _, p := range sp.plans {
		for _, task := range p.tasks {
			if _, isLive := load[task.to]; !task.done && len(live) > 0 && !isLive {
				task.to = ls.leastLoadedLocked(live, load)
				task.sent = time.Time{}
			}
		}
	}
	return held
}

// splitLoadLocked counts the unfinished tasks of every live tserver.
func (ls *leaderState) splitLoadLocked(live []string) map[string]int {
	load := make(map[string]int, len(live))
	for _, u := range live {
		load[u] = 0
	}
	for _, p := range ls.splits.plans {
		for _, task := range p.tasks {
			if _, ok := load[task.to]; ok && !task.done {
				load[task.to]++
			}
		}
	}
	return load
}

// leastLoadedLocked picks the live tserver with the fewest unfinished
// tasks, starting the scan at a rotating index so that ties go round-robin,
// and counts the new task in load.
func (ls *leaderState) leastLoadedLocked(live []string, load map[string]int) string {
	best := ""
	for i := range live {
		u := live[(ls.splits.next+i)%len(live)]
		if best == "" || load[u] < load[best] {
			best = u
		}
	}
	ls.splits.next++
	load[best]++
	return best
}

// planSplitLocked cuts the files of prefix from the tablets' oldest
// position on into tasks, handed to live tservers by load.
func (ls *leaderState) planSplitLocked(prefix string, tabs []*pb.TabletMeta, live []string, load map[string]int, now time.Time) *splitPlan {
	p := &splitPlan{prefix: prefix, tablets: map[string]*splitTablet{}, tasks: map[string]*splitTask{}}
	var cuts []int64
	for _, t := range tabs {
		from, _ := meta.OldestPosition(t, prefix)
		p.tablets[t.TabletId] = &splitTablet{epoch: t.Epoch, from: from}
		cuts = append(cuts, from)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	lo, hi := cuts[0], now.UnixMicro()
	if n := int64(min(len(live), splitSlices)); n > 1 && hi > lo {
		for i := int64(1); i < n; i++ {
			cuts = append(cuts, lo+(hi-lo)*i/n)
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
	}
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
			to = ls.leastLoadedLocked(live, load)
		}
		p.tasks[task.TaskId] = &splitTask{pb: task, to: to}
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
// group is done, the leader's tick commits the group (commitSplits) and
// assigns its tablets. A delete task's report removes the file from the
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
	defer ls.mu.Unlock()
	p := ls.splits.plans[split.Prefix]
	var task *splitTask
	if p != nil {
		task = p.tasks[req.TaskId]
	}
	if task == nil {
		return nil, apierr.FailedPrecondition("log split task %s is not running (finished, timed out, or planned by an earlier leader)", req.TaskId)
	}
	if !task.done {
		task.done = true
		p.group.pending--
		p.bytesRead += req.BytesRead
		for tab, f := range req.RecoveryFiles {
			if t := p.tablets[tab]; t != nil && slices.Contains(task.pb.TabletIds, tab) {
				t.files = append(t.files, f)
			}
		}
		if p.group.pending == 0 {
			ls.poke()
		}
	}
	return &pb.ReportLogSplitResponse{}, nil
}

// commitSplits commits every group whose tasks all answered, all in one
// MetaLogSplitsDone command: each tablet's positions of each prefix are
// replaced by its recovery files. The tick calls it before it reads the
// unassigned tablets, so they are assigned in the same tick. A group whose
// command fails stays and is committed by a later tick.
func (ls *leaderState) commitSplits(ctx context.Context) {
	m := ls.m
	ls.mu.Lock()
	var groups []*splitGroup
	cmd := &spb.MetaLogSplitsDone{}
	for _, g := range ls.splits.groups {
		if g.pending > 0 || g.committing {
			continue
		}
		g.committing = true
		groups = append(groups, g)
		for _, p := range g.plans {
			done := &spb.MetaLogSplitDone{Prefix: p.prefix}
			for id, t := range p.tablets {
				done.Items = append(done.Items, &spb.MetaLogSplitDone_Item{TabletId: id, ExpectedEpoch: t.epoch, FromFileTimestamp: t.from, RecoveryFiles: t.files})
			}
			slices.SortFunc(done.Items, func(a, b *spb.MetaLogSplitDone_Item) int { return cmp.Compare(a.TabletId, b.TabletId) })
			cmd.Splits = append(cmd.Splits, done)
		}
	}
	ls.mu.Unlock()
	if len(groups) == 0 {
		return
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_LogSplitsDone{LogSplitsDone: cmd}})
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, g := range groups {
		g.committing = false
	}
	if err != nil {
		m.log.Warn("committing log splits failed; retrying on the next tick", "prefixes", len(cmd.Splits), "err", err)
		return
	}
	now := time.Now()
	tablets, tasks := 0, 0
	for _, g := range groups {
		for _, p := range g.plans {
			files := 0
			for _, t := range p.tablets {
				files += len(t.files)
			}
			tablets += len(p.tablets)
			tasks += len(p.tasks)
			if ls.splits.plans[p.prefix] == p {
				delete(ls.splits.plans, p.prefix)
			}
			m.log.Info("log split done", "prefix", p.prefix, "tablets", len(p.tablets), "tasks", len(p.tasks),
				"recovery_files", files, "bytes_read", p.bytesRead, "took", now.Sub(g.began))
		}
	}
	ls.splits.groups = slices.DeleteFunc(ls.splits.groups, func(g *splitGroup) bool { return slices.Contains(groups, g) })
	m.events.add("recovery", "log split of %d dead prefixes done in one command: %d tablets, %d tasks, took %s", len(cmd.Splits), tablets, tasks,
		now.Sub(groups[0].began).Round(time.Millisecond))
	m.log.Info("log splits committed", "prefixes", len(cmd.Splits), "tablets", tablets, "applied", res.Applied, "tasks", tasks)
}
