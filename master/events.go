package master

import (
	"fmt"
	"sync"
	"time"
)

// eventRingSize bounds the recent events a master keeps for its status
// page.
const eventRingSize = 256

// event is one recent cluster event as the leader saw it happen.
type event struct {
	At   time.Time
	Kind string // "leader", "tserver", "recovery", "split", "merge", "move", "table"
	Text string
}

// eventRing is a bounded in-memory ring of recent events. Only the leader
// session records into it (it is the one that declares tservers dead,
// assigns, moves and commits splits); a master keeps its ring across
// sessions, so a follower shows what it saw while it led. Nothing of it
// is persisted or replicated: a restarted master starts empty.
type eventRing struct {
	mu   sync.Mutex
	buf  []event
	next int // where the next event goes once buf is full
}

func (r *eventRing) add(kind, format string, args ...any) {
	e := event{At: time.Now(), Kind: kind, Text: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < eventRingSize {
		r.buf = append(r.buf, e)
		return
	}
	r.buf[r.next] = e
	r.next = (r.next + 1) % eventRingSize
}

// recent returns the events newest first.
func (r *eventRing) recent() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]event, 0, len(r.buf))
	for i := len(r.buf) - 1; i >= 0; i-- {
		out = append(out, r.buf[(r.next+i)%len(r.buf)])
	}
	return out
}
