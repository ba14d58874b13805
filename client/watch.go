package client

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
)

// errCallMoved is the cancel cause of a call whose tablet moved while it
// waited for the tserver.
var errCallMoved = errors.New("client: the tablet moved while the call waited for the tserver")

// callWatch times out a unary call or a stream to one tablet and follows
// the tablet (see the package documentation, "Calls follow the tablet"):
// the call is cancelled after the attempt timeout without a message
// (errIdle), and, every move check (WithMoveCheck) without one, the
// tablet's location is checked with the master: if the tablet moved, the
// call is cancelled at once (errCallMoved) and retried on the new owner
// as its retry rules allow. It is one timer per call, reset by each
// message, for the calls that are not commands (scans, bulk writes,
// conditional and read-modify-write mutations): the batch stream's
// commands are followed by their session's expire tick instead.
type callWatch struct {
	ctx     context.Context // the call's
	stopCtx context.CancelCauseFunc
	timer   *time.Timer
	tick    time.Duration
	heard   atomic.Int64 // when the call started or its last message came, in Unix nanoseconds
}

// watch returns the context a call to loc's tablet should use, and its
// watch, which the caller stops when the call is over.
func (t *Table) watch(ctx context.Context, loc *location) (context.Context, *callWatch) {
	idle, every := t.c.opts.attemptTimeout, t.c.opts.moveCheck
	cctx, cancel := context.WithCancelCause(ctx)
	w := &callWatch{ctx: cctx, tick: idle}
	if every > 0 && every < idle {
		w.tick = every
	}
	w.heard.Store(time.Now().UnixNano())
	w.timer = time.AfterFunc(time.Hour, func() {
		if cctx.Err() != nil {
			return // the call is over
		}
		silent := time.Since(time.Unix(0, w.heard.Load()))
		switch {
		case silent >= idle:
			cancel(errIdle)
			return
		case silent >= w.tick && movedFrom(cctx, t.lc, loc, w.tick):
			cancel(errCallMoved)
			return
		}
		silent = time.Since(time.Unix(0, w.heard.Load()))
		next := w.tick
		if silent < w.tick {
			next = w.tick - silent // a message came meanwhile
		}
		w.timer.Reset(max(min(next, idle-silent), time.Millisecond))
	})
	w.timer.Reset(w.tick)
	context.AfterFunc(cctx, func() { w.timer.Stop() })
	w.stopCtx = cancel
	return cctx, w
}

// message records a message of the call: the silence starts again.
func (w *callWatch) message() {
	w.heard.Store(time.Now().UnixNano())
	w.timer.Reset(w.tick)
}

// stop ends the watch and the call's context.
func (w *callWatch) stop() { w.stopCtx(nil) }

// err turns the failure of a call the watch cancelled into a retryable
// error: DeadlineExceeded after the attempt timeout's silence, Unavailable
// when the tablet moved. Other failures are returned as they are.
func (w *callWatch) err(err error) error {
	if err == nil {
		return nil
	}
	switch cause := context.Cause(w.ctx); {
	case errors.Is(cause, errIdle):
		return apierr.Wrap(codes.DeadlineExceeded, err, "%v", errIdle)
	case errors.Is(cause, errCallMoved):
		return apierr.Wrap(codes.Unavailable, err, "%v", errCallMoved)
	}
	return err
}
