package master

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"bighive/meta"
	pb "bighive/proto/bighivepb"
)

// TestPlanningDataDriven runs the leader's planning, the pure parts of its
// loop and of Heartbeat (doc.go, "Leases and assignment"), over the cases
// of testdata/planning: planAssign (unassigned tablets to the least loaded
// live tserver, ties by uuid), planMoves with moveBudgetLocked and
// rebalanceTargetsLocked (rebalancing within a move budget, in flight and
// per interval, to warm tservers only) and planHeartbeat with reconcileLocked and assignmentsLocked
// (full and delta heartbeats, send_full, reuse of the last
// reconciliation, stray tablets unassigned, owned ones (re)sent at most
// once per ResendInterval). The metadata is a small in-memory model
// (ddPlanner): tablets with owner and epoch, and each tserver's ownership
// generation, bumped as meta.FSM.OwnerGeneration is. The clock is fake; no
// randomness. Commands (each file's first lines say more):
//
//	reset [resend=DUR] [warmup=DUR] [per-interval=N interval=DUR]
//	                                   a new leader session, no tablets
//	                                   (no warm-up and no bound per
//	                                   interval unless given)
//	tservers                           the live tservers, one uuid a line
//	register ts=U                      U registers now (live, warming up)
//	tablets                            "ID [table=T] [owner=U] [epoch=N]"
//	                                   a line (sets them), "delete ID"
//	show                               tablets, counts, moves in flight
//	assign                             plan and commit one tick's assignment
//	rebalance max-moves=N              plan moves (held in memory)
//	move-done tablet=ID                commit a move: owner = to, epoch+1
//	heartbeat ts=U seq=N [inc=N] [delta base=N] [removed=(A,B)]
//	                                   held tablets "ID@EPOCH [loading]"
//	advance by=DUR                     move the clock on
//
// Regenerate the expected output with
//
//	go test ./master -run DataDriven -rewrite
//
// and read every changed line before committing it.
func TestPlanningDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/planning", func(t *testing.T, path string) {
		p := newDDPlanner(Config{ResendInterval: 150 * time.Millisecond, MovesPerInterval: -1})
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return p.run(t, d)
		})
	})
}

// ddTablet is a tablet of the metadata model.
type ddTablet struct {
	table string
	owner string // "" while UNASSIGNED
	epoch int64
}

// ddPlanner is a leader session over an in-memory metadata model.
type ddPlanner struct {
	ls      *leaderState
	now     time.Time
	live    []string // sorted
	tablets map[string]*ddTablet
	gens    map[string]uint64 // ownership generation per tserver
}

func newDDPlanner(cfg Config) *ddPlanner {
	m := &Master{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ls := &leaderState{m: m, since: now, kick: make(chan struct{}, 1),
		leases: map[string]*lease{}, moves: map[string]*move{}, prio: map[string]pb.CachePriority{},
		sizes: map[string]int64{}, space: map[string]*pb.TabletSpace{}}
	return &ddPlanner{ls: ls, now: now, tablets: map[string]*ddTablet{}, gens: map[string]uint64{}}
}

func (p *ddPlanner) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "reset":
		cfg := Config{ResendInterval: p.ls.m.cfg.ResendInterval, MovesPerInterval: -1}
		if d.HasArg("resend") {
			cfg.ResendInterval = ddDuration(t, d, "resend")
		}
		if d.HasArg("warmup") {
			cfg.RebalanceWarmup = ddDuration(t, d, "warmup")
		}
		if d.HasArg("per-interval") {
			d.ScanArgs(t, "per-interval", &cfg.MovesPerInterval)
			cfg.MoveInterval = ddDuration(t, d, "interval")
		}
		*p = *newDDPlanner(cfg)
		return ""
	case "tservers":
		p.live = strings.Fields(d.Input)
		slices.Sort(p.live)
		return p.counts()
	case "register":
		var uuid string
		d.ScanArgs(t, "ts", &uuid)
		l := newLease(uuid, 1, p.now)
		l.heard, l.registered = true, p.now
		p.ls.leases[uuid] = l
		if !slices.Contains(p.live, uuid) {
			p.live = append(p.live, uuid)
			slices.Sort(p.live)
		}
		return p.counts()
	case "tablets":
		for _, line := range ddLines(d.Input) {
			p.setTablet(t, d, line)
		}
		return p.show()
	case "show":
		return p.show()
	case "assign":
		return p.assign()
	case "rebalance":
		var maxMoves int
		d.ScanArgs(t, "max-moves", &maxMoves)
		return p.rebalance(maxMoves)
	case "move-done":
		var id string
		d.ScanArgs(t, "tablet", &id)
		mv := p.ls.moves[id]
		if mv == nil {
			d.Fatalf(t, "no move of %s in flight", id)
		}
		delete(p.ls.moves, id)
		tab := p.tablets[id]
		p.setOwner(id, tab, mv.to, tab.epoch+1)
		return p.show()
	case "heartbeat":
		return p.heartbeat(t, d)
	case "advance":
		p.now = p.now.Add(ddDuration(t, d, "by"))
		return ""
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// setTablet applies one line of the tablets command.
func (p *ddPlanner) setTablet(t *testing.T, d *datadriven.TestData, line string) {
	f := strings.Fields(line)
	if f[0] == "delete" {
		for _, id := range f[1:] {
			if tab := p.tablets[id]; tab != nil {
				p.gens[tab.owner]++
				delete(p.tablets, id)
			}
		}
		return
	}
	id := f[0]
	tab := p.tablets[id]
	if tab == nil {
		tab = &ddTablet{table: "t"}
		p.tablets[id] = tab
	}
	owner, epoch := tab.owner, tab.epoch
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "table":
			tab.table = v
			p.gens[tab.owner]++
		case "owner":
			owner = v
		case "epoch":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				d.Fatalf(t, "%s: %v", line, err)
			}
			epoch = n
		default:
			d.Fatalf(t, "%s: unknown field %q", line, k)
		}
	}
	p.setOwner(id, tab, owner, epoch)
}

// setOwner changes a tablet's owner and epoch; the generation of each
// tserver whose owned set changes moves on (meta.FSM.OwnerGeneration).
func (p *ddPlanner) setOwner(id string, tab *ddTablet, owner string, epoch int64) {
	if tab.owner != owner || tab.epoch != epoch {
		p.gens[tab.owner]++
		p.gens[owner]++
	}
	tab.owner, tab.epoch = owner, epoch
}

// ownedIDs lists the tablets of owner ("": UNASSIGNED) in id order, as the
// owners index does (meta.Reader.TabletIDsOf).
func (p *ddPlanner) ownedIDs(owner string) []string {
	var out []string
	for id, tab := range p.tablets {
		if tab.owner == owner {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// tickCounts is every live tserver's count as the tick projects it: what
// it owns, minus moves away, plus moves to it.
func (p *ddPlanner) tickCounts() (counts map[string]int, owned map[string][]string) {
	counts, owned = map[string]int{}, map[string][]string{}
	for _, u := range p.live {
		owned[u] = p.ownedIDs(u)
		counts[u] = len(owned[u])
	}
	for _, mv := range p.ls.moves {
		counts[mv.from]--
		counts[mv.to]++
	}
	return counts, owned
}

// assign is step 3 of the tick: the unassigned tablets not moving, in id
// order, planned over the live tservers and committed (epoch + 1).
func (p *ddPlanner) assign() string {
	counts, _ := p.tickCounts()
	var ids []string
	for _, id := range p.ownedIDs("") {
		if p.ls.moves[id] == nil {
			ids = append(ids, id)
		}
	}
	plan := planAssign(ids, p.live, counts)
	var b strings.Builder
	if plan == nil {
		b.WriteString("no live tserver\n")
	}
	for _, id := range ids {
		if u, ok := plan[id]; ok {
			tab := p.tablets[id]
			p.setOwner(id, tab, u, tab.epoch+1)
			fmt.Fprintf(&b, "%s -> %s (epoch %d)\n", id, u, tab.epoch)
		}
	}
	b.WriteString(p.countsOf("projected", counts))
	return b.String()
}

// rebalance is step 4 of the tick: movable tablets (owned by a live
// tserver, not moving), the leader's budget (at most maxMoves in flight
// and the bound per interval) and targets (warm tservers).
func (p *ddPlanner) rebalance(maxMoves int) string {
	ls := p.ls
	ls.m.cfg.MaxMoves = maxMoves
	counts, owned := p.tickCounts()
	budget := ls.moveBudgetLocked(p.now)
	targets := ls.rebalanceTargetsLocked(p.live, p.now)
	movable := map[string][]string{}
	for _, u := range p.live {
		for _, id := range owned[u] {
			if ls.moves[id] == nil {
				movable[u] = append(movable[u], id)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "budget %d\n", budget)
	if len(targets) < len(p.live) {
		var warming []string
		for _, u := range p.live {
			if !slices.Contains(targets, u) {
				warming = append(warming, u)
			}
		}
		fmt.Fprintf(&b, "warming up: %s\n", ddList(warming))
	}
	if budget > 0 {
		for _, pm := range planMoves(movable, p.live, targets, counts, budget) {
			ls.startMoveLocked(pm, p.tablets[pm.tablet].epoch, p.now)
			fmt.Fprintf(&b, "move %s: %s -> %s\n", pm.tablet, pm.from, pm.to)
		}
	}
	b.WriteString(p.countsOf("projected", counts))
	return b.String()
}

// heartbeat runs what Heartbeat decides without the metadata's raft and
// RPCs: planHeartbeat, then (when it reconciles) reconcileLocked and
// assignmentsLocked over the model's tablets.
func (p *ddPlanner) heartbeat(t *testing.T, d *datadriven.TestData) string {
	var uuid string
	var seq uint64
	inc := int64(1)
	d.ScanArgs(t, "ts", &uuid)
	d.ScanArgs(t, "seq", &seq)
	d.MaybeScanArgs(t, "inc", &inc)
	req := &pb.HeartbeatRequest{Uuid: uuid, Incarnation: inc, Seq: seq, Delta: d.HasArg("delta")}
	d.MaybeScanArgs(t, "base", &req.BaseSeq)
	if arg, ok := d.Arg("removed"); ok {
		req.RemovedTabletIds = arg.Vals
	}
	for _, line := range ddLines(d.Input) {
		f := strings.Fields(line)
		id, ep, ok := strings.Cut(f[0], "@")
		epoch, err := strconv.ParseInt(ep, 10, 64)
		if !ok || err != nil || len(f) > 2 || len(f) == 2 && f[1] != "loading" {
			d.Fatalf(t, "held tablet %q: want ID@EPOCH [loading]", line)
		}
		req.Tablets = append(req.Tablets, &pb.TabletReport{TabletId: id, Epoch: epoch, Serving: len(f) == 1})
	}
	if err := validDelta(req); err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	ls := p.ls
	gen := p.gens[uuid]
	base := ls.leases[uuid]
	if base != nil && (base.incarnation != req.Incarnation || base.dead) {
		base = nil
	}
	plan := planHeartbeat(base, req, gen, p.now, ls.movesFromLocked(uuid))
	l := ls.leases[uuid]
	if l == nil || l.incarnation != req.Incarnation {
		l = newLease(uuid, req.Incarnation, p.now)
		ls.leases[uuid] = l
	}
	l.last, l.heard = p.now, true
	var b strings.Builder
	if plan.sendFull {
		l.held = nil
		fmt.Fprintf(&b, "%s\n", plan.kind(req))
		return b.String()
	}
	l.held, l.ackSeq, l.recon = plan.held, req.Seq, plan.recon
	var assigned []*pb.TabletAssignment
	if plan.reconcile {
		var owned []ownedTablet
		full := map[string]*pb.TabletMeta{}
		for _, id := range p.ownedIDs(uuid) {
			tab := p.tablets[id]
			owned = append(owned, ownedTablet{id: id, Brief: meta.Brief{Table: tab.table, Tserver: uuid, Epoch: tab.epoch}})
			full[id] = &pb.TabletMeta{TabletId: id, Table: tab.table, TserverUuid: uuid, Epoch: tab.epoch}
		}
		missing := map[string]bool{}
		for id := range plan.held {
			if p.tablets[id] == nil {
				missing[id] = true
			}
		}
		ls.reconcileLocked(l, owned, gen, missing)
		assigned = ls.assignmentsLocked(l, owned, full, map[string]*pb.TableSchema{}, p.now)
	}
	fmt.Fprintf(&b, "%s acked=%d\n", plan.kind(req), l.ackSeq)
	var held []string
	for id, h := range l.held {
		s := fmt.Sprintf("%s@%d", id, h.epoch)
		if !h.serving {
			s += "(loading)"
		}
		held = append(held, s)
	}
	slices.Sort(held)
	fmt.Fprintf(&b, "held: %s\n", ddList(held))
	var un []string
	for _, u := range l.recon.stray {
		un = append(un, fmt.Sprintf("%s@%d", u.TabletId, u.Epoch))
	}
	slices.Sort(un)
	fmt.Fprintf(&b, "unassign: %s\n", ddList(un))
	var as []string
	for _, a := range assigned {
		as = append(as, fmt.Sprintf("%s@%d", a.Tablet.TabletId, a.Tablet.Epoch))
	}
	fmt.Fprintf(&b, "assign: %s\n", ddList(as))
	var away []string
	for id, mv := range ls.moves {
		if mv.from == uuid {
			away = append(away, fmt.Sprintf("%s@%d to %s", id, mv.epoch, mv.to))
		}
	}
	if len(away) > 0 {
		slices.Sort(away)
		fmt.Fprintf(&b, "moving away: %s\n", strings.Join(away, ", "))
	}
	if due := l.recon.resendDue; !due.IsZero() {
		fmt.Fprintf(&b, "next resend in %s\n", due.Sub(p.now))
	}
	return b.String()
}

// show prints the tablets, the counts and the moves in flight.
func (p *ddPlanner) show() string {
	var b strings.Builder
	ids := make([]string, 0, len(p.tablets))
	for id := range p.tablets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		tab := p.tablets[id]
		owner := tab.owner
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(&b, "%s table=%s owner=%s epoch=%d\n", id, tab.table, owner, tab.epoch)
	}
	var moves []string
	for id, mv := range p.ls.moves {
		moves = append(moves, fmt.Sprintf("%s: %s -> %s", id, mv.from, mv.to))
	}
	slices.Sort(moves)
	for _, mv := range moves {
		fmt.Fprintf(&b, "moving %s\n", mv)
	}
	b.WriteString(p.counts())
	return b.String()
}

// counts prints what each live tserver owns in the metadata.
func (p *ddPlanner) counts() string {
	c := map[string]int{}
	for _, u := range p.live {
		c[u] = len(p.ownedIDs(u))
	}
	return p.countsOf("owned", c)
}

func (p *ddPlanner) countsOf(label string, c map[string]int) string {
	var parts []string
	for _, u := range p.live {
		parts = append(parts, fmt.Sprintf("%s=%d", u, c[u]))
	}
	return label + ": " + ddList(parts) + "\n"
}

func ddList(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

// ddLines returns the non-empty lines of s.
func ddLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func ddDuration(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return v
}
