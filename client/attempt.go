package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// attemptCtx is one attempt's context: the caller's context with the
// attempt's deadline (Client.do). It makes the deadline's timer, and the
// Done channel that the timer closes, only when something asks for Done:
// a unary gRPC call does, but a call on the batch stream reads the
// deadline and waits on the caller's context alone, its session timing it
// out (batchSession.expire). A context.WithDeadline for every attempt,
// its timer and its link into the caller's context, was a tenth of the
// native client's CPU per Get.
type attemptCtx struct {
	context.Context // the caller's
	start, deadline time.Time

	// final is the call's retry deadline (Client.do); keep says the call
	// is not idempotent, so a batch-stream command of it, once sent, waits
	// for its answer until final rather than until deadline: no retry can
	// follow it, and giving up early would only make its outcome unknown.
	final time.Time
	keep  bool
	// lc and loc are the tablet the attempt goes to (follow), nil when
	// unknown: a command that waits too long checks whether it moved.
	lc  *locCache
	loc *location

	once  sync.Once
	timed atomic.Pointer[timedCtx] // set by the first Done
}

type timedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newAttemptCtx(parent context.Context, start, deadline time.Time) *attemptCtx {
	return &attemptCtx{Context: parent, start: start, deadline: deadline}
}

// follow records the tablet location an attempt (ctx, when it is one)
// goes to, for its move checks (attemptCtx.moved).
func follow(ctx context.Context, lc *locCache, loc *location) {
	if a, ok := ctx.(*attemptCtx); ok {
		a.lc, a.loc = lc, loc
	}
}

// moved reports whether the master no longer places the attempt's tablet
// where the attempt sent it (another tserver, another epoch, a split, or
// no tserver at all): the call should stop waiting there. It asks the
// master unless a lookup made since a quarter of every ago answered
// (locCache.moved), and gives up after every, answering false (the master
// could not tell: the call goes on waiting). It is the slow path of a
// call that has waited every already, never the fast one.
func (a *attemptCtx) moved(ctx context.Context, every time.Duration) bool {
	if a.lc == nil {
		return false
	}
	return movedFrom(ctx, a.lc, a.loc, every)
}

// movedFrom is attemptCtx.moved for a call that went to loc, a tablet of
// lc's table.
func movedFrom(ctx context.Context, lc *locCache, loc *location, every time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, every)
	defer cancel()
	return lc.moved(ctx, loc, time.Now().Add(-every/4))
}

// timer returns the attempt as a context.WithDeadline, making it once.
func (a *attemptCtx) timer() context.Context {
	a.once.Do(func() {
		ctx, cancel := context.WithDeadline(a.Context, a.deadline)
		a.timed.Store(&timedCtx{ctx: ctx, cancel: cancel})
	})
	return a.timed.Load().ctx
}

// Deadline is the attempt's.
func (a *attemptCtx) Deadline() (time.Time, bool) { return a.deadline, true }

// Done is closed when the caller's context ends or the attempt's deadline
// passes.
func (a *attemptCtx) Done() <-chan struct{} { return a.timer().Done() }

// Err is the caller's context's error, else DeadlineExceeded once the
// attempt's deadline passed.
func (a *attemptCtx) Err() error {
	if t := a.timed.Load(); t != nil {
		return t.ctx.Err()
	}
	if err := a.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(a.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value is the caller's context's, or the timer's once made (so that
// context.Cause finds the attempt's own cancellation).
func (a *attemptCtx) Value(key any) any {
	if t := a.timed.Load(); t != nil {
		return t.ctx.Value(key)
	}
	return a.Context.Value(key)
}

// AfterFunc lets a context derived from the attempt (gRPC derives one per
// call) follow it without a goroutine of its own, as it follows the
// standard library's contexts.
func (a *attemptCtx) AfterFunc(f func()) func() bool { return context.AfterFunc(a.timer(), f) }

// release stops the timer, if one was made; the attempt is over, and a
// Done asked for afterwards (by a goroutine the attempt left behind) is
// closed already rather than a new timer.
func (a *attemptCtx) release() {
	a.once.Do(func() { a.timed.Store(&released) })
	a.timed.Load().cancel()
}

// released stands for the timer of an attempt released before it made
// one.
var released = func() timedCtx {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return timedCtx{ctx: ctx, cancel: cancel}
}()

// splitAttempt returns the context a call should wait on and the attempt
// when ctx is one (nil otherwise, ctx then carrying its own deadline).
func splitAttempt(ctx context.Context) (context.Context, *attemptCtx) {
	if a, ok := ctx.(*attemptCtx); ok {
		return a.Context, a
	}
	return ctx, nil
}
