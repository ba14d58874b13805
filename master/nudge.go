package master

import (
	"context"
	"maps"
	"slices"
	"time"

	"bighive/meta"
	pb "bighive/proto/bighivepb"
)

// Nudges. What the leader decides for a tserver reaches it in a heartbeat
// reply: an assignment just committed, the unassignment that starts a
// move, a log split task. Waiting for the tserver's next heartbeat costs
// up to Config.Heartbeat at each of those steps, and a recovery or a move
// takes several in a row (split tasks out, the assignment out; for a
// move, the unassignment out, then the assignment). So each tick notes
// the tservers it has something new for (noteNewsLocked), and at its end
// asks each to heartbeat now with an empty TServer.AssignTablets, which a
// tserver answers by heartbeating at once. Best effort: a nudge that
// fails (or a tserver that predates nudges and ignores it) costs only
// that wait; the reply itself is still the one way state reaches the
// tserver, so nothing about leases or reconciliation changes.

// maxNudges bounds the nudges in flight; a tick with news for more
// tservers than that (a big table created, say) nudges that many, and the
// others hear at their next heartbeat.
const maxNudges = 64

// noteNewsLocked marks tserver as one the tick has something new for.
// ls.mu is held.
func (ls *leaderState) noteNewsLocked(tserver string) {
	if tserver == "" {
		return
	}
	if ls.news == nil {
		ls.news = map[string]bool{}
	}
	ls.news[tserver] = true
}

// noteSplitNewsLocked notes the tservers of log split tasks never sent.
// ls.mu is held.
func (ls *leaderState) noteSplitNewsLocked() {
	for _, p := range ls.splits.plans {
		for _, task := range p.tasks {
			if !task.done && task.sent.IsZero() {
				ls.noteNewsLocked(task.to)
			}
		}
	}
}

// nudgeNews asks every tserver noted since the last call to heartbeat
// now. It does not wait for the answers.
func (ls *leaderState) nudgeNews(ctx context.Context) {
	ls.mu.Lock()
	uuids := slices.Sorted(maps.Keys(ls.news))
	ls.news = nil
	if ls.nudges == nil {
		ls.nudges = make(chan struct{}, maxNudges)
	}
	slots := ls.nudges
	ls.mu.Unlock()
	if len(uuids) == 0 {
		return
	}
	uuids = uuids[:min(len(uuids), maxNudges)]
	m := ls.m
	var addrs []string
	_ = m.view(func(r *meta.Reader) error {
		for _, u := range uuids {
			if ts, err := r.TServer(u); err == nil && ts.Address != "" {
				addrs = append(addrs, ts.Address)
			}
		}
		return nil
	})
	for _, addr := range addrs {
		select {
		case slots <- struct{}{}:
		default:
			return // maxNudges in flight
		}
		go func() {
			defer func() { <-slots }()
			nctx, cancel := context.WithTimeout(ctx, max(m.cfg.Heartbeat, 100*time.Millisecond))
			defer cancel()
			err := m.callTServerOnce(nctx, addr, func(ctx context.Context, c pb.TServerClient) error {
				_, err := c.AssignTablets(ctx, &pb.AssignTabletsRequest{})
				return err
			})
			if err != nil {
				m.log.Debug("nudging a tserver failed; it hears at its next heartbeat", "tserver", addr, "err", err)
			}
		}()
	}
}
