package fleetsim

import (
	"context"
	"sync"
	"time"

	"bighive/meta"
)

// UnassignedWatch samples the leader's UNASSIGNED tablets (the owners
// index under "") and keeps how long each stayed there.
type UnassignedWatch struct {
	mu      sync.Mutex
	since   map[string]time.Time
	longest time.Duration
	seen    int
	stop    context.CancelFunc
	done    chan struct{}
}

// WatchUnassigned samples every interval until Stop.
func (c *Masters) WatchUnassigned(every time.Duration) *UnassignedWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &UnassignedWatch{since: map[string]time.Time{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			for i := range c.Peers {
				if !c.isLeader(ctx, i) {
					continue
				}
				if ids, ok := c.unassigned(ctx, i); ok {
					w.sample(ids, time.Now())
				}
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
	return w
}

// unassigned lists the tablets master i has no owner for (ok false when
// it could not say): its owners index under "", or, for a process, what
// its GetTableLocations answers.
func (c *Masters) unassigned(ctx context.Context, i int) (ids []string, ok bool) {
	if c.binary != "" {
		return c.procUnassigned(ctx, i)
	}
	m := c.M[i]
	if m == nil {
		return nil, false
	}
	err := m.View(func(r *meta.Reader) error { ids = r.TabletIDsOf(""); return nil })
	return ids, err == nil
}

func (w *UnassignedWatch) sample(ids []string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := make(map[string]bool, len(ids))
	for _, id := range ids {
		cur[id] = true
		if _, ok := w.since[id]; !ok {
			w.since[id] = now
			w.seen++
		}
	}
	for id, t := range w.since {
		if !cur[id] {
			w.longest = max(w.longest, now.Sub(t))
			delete(w.since, id)
		}
	}
}

// Stop ends the sampling and returns the longest time a tablet stayed
// UNASSIGNED (counting the ones still there), and how many tablets were
// seen UNASSIGNED at all.
func (w *UnassignedWatch) Stop() (longest time.Duration, seen int) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for _, t := range w.since {
		w.longest = max(w.longest, now.Sub(t))
	}
	return w.longest, w.seen
}
