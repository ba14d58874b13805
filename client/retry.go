package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
)

// backoff is capped exponential backoff with jitter: each wait is drawn
// uniformly from [d/2, d], then d doubles up to max.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	return &backoff{min: min, max: max, cur: min}
}

func (b *backoff) next() time.Duration {
	d := b.cur
	if b.cur < b.max {
		b.cur *= 2
		if b.cur > b.max {
			b.cur = b.max
		}
	}
	half := int64(d / 2)
	if half <= 0 {
		return d
	}
	return time.Duration(half + rand.Int64N(half+1))
}

func (b *backoff) reset() { b.cur = b.min }

// streak bounds a run of consecutive failed attempts of a long operation
// (a scan, a bulk write) whose context has no deadline: the operation
// itself may run for as long as it makes progress, but it gives up after
// failing for longer than timeout in a row.
type streak struct {
	timeout time.Duration
	start   time.Time // zero: no failure since the last progress
}

func (s *streak) progress() { s.start = time.Time{} }

// expired records a failure and reports whether the streak ran too long.
func (s *streak) expired(ctx context.Context) bool {
	if _, ok := ctx.Deadline(); ok {
		return false
	}
	if s.start.IsZero() {
		s.start = time.Now()
		return false
	}
	return time.Since(s.start) > s.timeout
}

// sleep waits d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// failure is how a failed attempt may be retried (the package
// documentation's "Retry rules"; what a call returns when it is not
// retried is its "Status rules": Client.do, deadlineError).
type failure int

const (
	// permanent: return the error; retrying cannot help.
	permanent failure = iota
	// safe: the request is known not to have been applied (a routing error,
	// or it never reached a server: not sent, or still queued on the batch
	// stream when its attempt timed out or its tablet moved); any request
	// may be retried.
	safe
	// ambiguous: the request may have been applied (it was sent and no
	// answer says it was not: a lost reply, an attempt's timeout, a broken
	// stream, its tablet moved while it waited); only idempotent requests
	// are retried, and a write that is not is answered Unavailable
	// "outcome unknown" (unknownOutcome).
	ambiguous
)

func (f failure) retry(idempotent bool) bool {
	return f == safe || f == ambiguous && idempotent
}

// unsentError marks a failure that happened before the request was sent
// (a location lookup, no tserver for the tablet).
type unsentError struct{ err error }

func (e *unsentError) Error() string { return e.err.Error() }
func (e *unsentError) Unwrap() error { return e.err }

func unsent(err error) error {
	if err == nil {
		return nil
	}
	return &unsentError{err}
}

// errIdle is the cancel cause of a stream that went quiet for too long.
var errIdle = errors.New("client: the tserver sent nothing within the attempt timeout")

// classify decides how an attempt's failure may be retried. ctx is the
// caller's (whole operation's) context; sent reports whether the request
// reached a transport stream.
func classify(ctx context.Context, err error, sent bool) failure {
	if ctx.Err() != nil {
		return permanent
	}
	return classifyErr(err, sent)
}

// classifyErr is classify for an operation whose context is still alive.
func classifyErr(err error, sent bool) failure {
	var ue *unsentError
	unsentErr := errors.As(err, &ue)
	if _, ok := apierr.TabletReason(err); ok {
		return safe
	}
	switch apierr.CodeOf(err) {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.Canceled:
		// Canceled and DeadlineExceeded with the caller's context alive mean
		// the attempt's own timeout fired. Unavailable includes a call that
		// stopped waiting because its tablet moved (movedError,
		// errCallMoved).
		if unsentErr || !sent {
			return safe
		}
		return ambiguous
	}
	return permanent
}

// statusError returns err as a gRPC status error whose message starts with
// prefix, keeping its code and details. Context errors become Canceled or
// DeadlineExceeded.
func statusError(err error, prefix string) error {
	if err == nil {
		return nil
	}
	if ue, ok := err.(*unsentError); ok {
		err = ue.err
	}
	st := apierr.ToStatus(err)
	p := st.Proto()
	p.Message = prefix + ": " + p.Message
	return status.FromProto(p).Err()
}

// deadlineError is the error of an operation whose retries ran out of
// time: ctx ended, or the retry timeout of a ctx without deadline passed.
// unknown says that an attempt may have applied a write (it reached a
// tserver and no answer says what became of it). The code is:
//
//   - Canceled when the caller cancelled ctx;
//   - Unavailable, with a message saying the outcome is unknown, when
//     unknown: the caller's deadline is not the write's fate;
//   - DeadlineExceeded when the caller's own deadline passed (ownDeadline);
//   - Unavailable when the client's retry timeout ran out: a call without a
//     deadline never ends in DeadlineExceeded, which the Cloud Bigtable
//     clients take as the caller's own deadline, final.
func deadlineError(ctx context.Context, prefix string, attempts int, last error, unknown bool) error {
	var ue *unsentError
	if errors.As(last, &ue) {
		last = ue.err
	}
	lastMsg := ""
	if last != nil {
		lastMsg = "; last error: " + status.Convert(last).Message()
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return status.Errorf(codes.Canceled, "%s: %v after %d attempts%s", prefix, context.Canceled, attempts, lastMsg)
	case unknown:
		return status.Errorf(codes.Unavailable, "%s: %s: no attempt answered within the deadline (%d attempts)%s", prefix, outcomeUnknown, attempts, lastMsg)
	case ownDeadline(ctx):
		return status.Errorf(codes.DeadlineExceeded, "%s: %v after %d attempts%s", prefix, context.DeadlineExceeded, attempts, lastMsg)
	}
	return status.Errorf(codes.Unavailable, "%s: still failing after %d attempts within the client's retry timeout%s", prefix, attempts, lastMsg)
}

// outcomeUnknown starts the message of every error of a write that may
// have been applied.
const outcomeUnknown = "outcome unknown, the write may or may not have been applied"

// unknownOutcome is the error of a write whose attempt reached a tserver
// and may have been applied, when it may not be retried (it is not
// idempotent): Unavailable whatever the attempt's code (an attempt's own
// timeout is not the caller's deadline), with a message saying the
// outcome is unknown.
func unknownOutcome(prefix string, err error) error {
	var ue *unsentError
	if errors.As(err, &ue) {
		err = ue.err
	}
	return status.Errorf(codes.Unavailable, "%s: %s: %s", prefix, outcomeUnknown, status.Convert(err).Message())
}

// retryTimeoutKey marks a context whose deadline is the client's retry
// timeout (Client.withDeadline), not the caller's.
type retryTimeoutKey struct{}

// ownDeadline reports whether ctx has a deadline that its caller set, not
// the client's retry timeout.
func ownDeadline(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok && ctx.Value(retryTimeoutKey{}) == nil
}

// errorPrefix formats the prefix of an operation's errors.
func errorPrefix(format string, args ...any) string {
	return "client: " + fmt.Sprintf(format, args...)
}
