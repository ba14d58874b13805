package tserver

import "sync/atomic"

// maxWorkers bounds the goroutines workers keeps; beyond it, a command
// group gets a goroutine of its own, as before the pool.
const maxWorkers = 256

// workers runs the batch stream's command groups on goroutines that it
// keeps for the next group. A new goroutine starts on a small stack that
// a read or a write grows several times, copying it each time (about a
// tenth of a warm Get's CPU in the profile); a kept goroutine grew it once.
// A group is handed to a worker only if one is idle, so no group waits
// for another to finish.
type workers struct {
	work chan func() // unbuffered: a send succeeds only to an idle worker
	stop chan struct{}
	n    atomic.Int32 // workers alive
}

func newWorkers() *workers {
	return &workers{work: make(chan func()), stop: make(chan struct{})}
}

// run runs f on an idle worker, a new worker, or (once maxWorkers are
// busy) a goroutine of its own. It does not wait for f.
func (w *workers) run(f func()) {
	select {
	case w.work <- f:
		return
	default:
	}
	if w.n.Add(1) <= maxWorkers {
		go w.loop(f)
		return
	}
	w.n.Add(-1)
	go f()
}

func (w *workers) loop(f func()) {
	defer w.n.Add(-1)
	for {
		f()
		select {
		case f = <-w.work:
		case <-w.stop:
			return
		}
	}
}

// close ends the idle workers and, as each finishes, the busy ones.
func (w *workers) close() { close(w.stop) }
