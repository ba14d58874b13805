// Package masterconn is the one connection to the master cluster that
// follows the leader. The client library, the tservers and the masters'
// own forwarding all call the masters through it.
//
// A call goes to the master believed to lead. Every attempt has its own
// deadline (Options.AttemptTimeout, within the caller's context), so a
// master that stopped answering — paused, partitioned, its host gone —
// costs one attempt, not the whole call. An attempt that fails in a way
// another master may answer is retried on another master:
//
//   - Unavailable with a NotLeader detail naming the leader: the named
//     leader next (unless it already failed this round, see below);
//   - other Unavailable (no leader yet, a master down, a broken transport),
//     the attempt's own DeadlineExceeded or Canceled while the caller's
//     context is alive, and errors that are no gRPC status at all (a dial
//     that failed): the next master in the list.
//
// A failed attempt also makes later calls start at the next master, so
// that a hung leader costs each caller at most one attempt. An attempt
// that its caller's deadline ended counts only if the master had a fair
// time to answer (50 ms, or the whole attempt timeout when shorter): a
// caller left with microseconds is no evidence against anyone, and no
// attempt at all is made for a caller whose context already ended.
//
// A master that timed out or failed its transport in the current round is
// not followed again by a NotLeader hint in that round: followers keep
// naming a hung leader until they elect another, and following them would
// bounce between a follower and the hung leader, never trying the third
// master. After a full round without success the call backs off (capped
// exponential, with jitter) and starts a new round, until its context ends.
//
// Every other error is returned as the master gave it, so a caller sees
// InvalidArgument, NotFound, FailedPrecondition … unchanged. A retried
// attempt may have been applied (its reply was lost): callers of
// non-idempotent methods see that as AlreadyExists and the like.
//
// Connections use gRPC keepalive (limits.GRPCKeepaliveDialOption), so a
// transport to a master that stopped answering is torn down and redialled.
package masterconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	"bighive/internal/tlsconf"
	pb "bighive/proto/bighivepb"
)

// Options configure a Conn. Zero values take the defaults.
type Options struct {
	// AttemptTimeout bounds one attempt against one master (default 5 s).
	// SetAttemptTimeout changes it later.
	AttemptTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait after a round of attempts
	// on every master failed (default 10 ms and 1 s).
	MinBackoff, MaxBackoff time.Duration
	// Credentials secure every connection (tlsconf.Credentials); nil is
	// the plaintext mode.
	Credentials credentials.TransportCredentials
	// DialOptions are added to every connection (after the transport
	// credentials, message size limits and keepalive).
	DialOptions []grpc.DialOption
	// Logger gets a debug line per backoff; nil is slog.Default().
	Logger *slog.Logger
}

// Conn is safe for concurrent use.
type Conn struct {
	opts    Options
	attempt atomic.Int64 // the attempt timeout, nanoseconds

	mu     sync.Mutex
	addrs  []string
	conns  map[string]*grpc.ClientConn
	leader int // index into addrs of the master to try first
	closed bool
}

// ErrClosed is returned by calls on a closed Conn. It is FailedPrecondition
// so no caller's retry loop spins on it.
var ErrClosed error = apierr.FailedPrecondition("masterconn: the connection is closed")

// New makes a Conn over the given master gRPC addresses (duplicates and
// empty entries dropped). It dials lazily.
func New(addrs []string, opts Options) (*Conn, error) {
	var list []string
	for _, a := range addrs {
		if a != "" && !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	if len(list) == 0 {
		return nil, apierr.InvalidArgument("masterconn: no master addresses given")
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = 5 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 10 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(time.Second, opts.MinBackoff)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Conn{opts: opts, addrs: list, conns: map[string]*grpc.ClientConn{}}
	c.attempt.Store(int64(opts.AttemptTimeout))
	return c, nil
}

// SetAttemptTimeout changes the attempt timeout of later attempts (a
// tserver learns its heartbeat interval from the master). d <= 0 is
// ignored.
func (c *Conn) SetAttemptTimeout(d time.Duration) {
	if d > 0 {
		c.attempt.Store(int64(d))
	}
}

// AttemptTimeout is the current attempt timeout.
func (c *Conn) AttemptTimeout() time.Duration { return time.Duration(c.attempt.Load()) }

// Addrs returns the master addresses, including any a leader hint added.
func (c *Conn) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.addrs)
}

// Leader returns the address the next call tries first.
func (c *Conn) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[c.leader]
}

// Prefer makes addr the master the next call tries first (a master that
// knows the raft leader says so). An address not yet known is added.
func (c *Conn) Prefer(addr string) {
	if addr == "" {
		return
	}
	i := c.index(addr)
	c.mu.Lock()
	c.leader = i
	c.mu.Unlock()
}

// Call runs fn against the leader, redirecting and retrying as the package
// comment says. fn's context is the attempt's; fn must use it. fn should
// return the gRPC call's error as it is: an error that is no status counts
// as a transport failure and is retried on the next master. When ctx ends
// first, the error is an *Error.
func (c *Conn) Call(ctx context.Context, fn func(ctx context.Context, m pb.MasterClient) error) error {
	return c.Invoke(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		return fn(ctx, pb.NewMasterClient(cc))
	})
}

// Invoke is Call for a caller that needs the raw connection (the masters'
// forwarding relays any Master method with it).
func (c *Conn) Invoke(ctx context.Context, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	backoff := c.opts.MinBackoff
	idx := c.first()
	var last error
	failed := map[string]bool{} // timed out or transport failed this round
	tried := 0                  // attempts this round
	for attempt := 1; ; attempt++ {
		addr, n := c.addr(idx)
		if err := ctx.Err(); err != nil {
			// No attempt on a master the caller left no time for: its
			// failure would be no evidence against that master.
			return retryError(ctx, attempt-1, last)
		}
		start := time.Now()
		err := c.attemptOn(ctx, addr, fn)
		if err == nil {
			c.mu.Lock()
			c.leader = idx
			c.mu.Unlock()
			return nil
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		hint, redirect, ok := retryable(err)
		if ok {
			next := (idx + 1) % n
			if redirect {
				if hint != "" && hint != addr && !failed[hint] {
					next = c.index(hint)
				}
			} else {
				failed[addr] = true
			}
			// Move on even when this call is over: a caller whose deadline
			// is no longer than one attempt (a client's lookup inside its
			// own attempt) would otherwise start every call at the hung
			// master. But only when the master had its chance (blames).
			if c.blames(ctx, redirect, time.Since(start)) {
				c.moveFrom(idx, next)
			}
			idx = next
		}
		if !ok {
			return err // the master's own answer
		}
		if ctx.Err() != nil || pastDeadline(ctx) {
			// pastDeadline: gRPC may end an attempt at the caller's
			// deadline a moment before the context's own timer fires;
			// that timeout is not a master's answer to keep as Last.
			return retryError(ctx, attempt, cmp(last, err))
		}
		last = err
		tried++
		if tried >= n {
			tried = 0
			clear(failed)
			c.opts.Logger.Debug("masterconn: no master answered as leader; backing off", "err", err, "attempt", attempt)
			sleep := backoff/2 + rand.N(backoff/2+1)
			if backoff < c.opts.MaxBackoff {
				backoff = min(2*backoff, c.opts.MaxBackoff)
			}
			t := time.NewTimer(sleep)
			select {
			case <-ctx.Done():
				t.Stop()
				return retryError(ctx, attempt, last)
			case <-t.C:
			}
		}
	}
}

// fairAttempt is how long a master must have had to answer before an
// attempt that its caller's deadline ended counts against it: a healthy
// master answers in milliseconds, even on a loaded machine, and a caller
// with a short budget (a client's move check of 200 ms) must still move
// off a hung one. The callers it leaves out are those that waited for a
// shared lookup and had microseconds left.
const fairAttempt = 50 * time.Millisecond

// blames reports whether a failed attempt (one another master may answer)
// that took took is evidence against its master, so that later calls
// start at the next one. A redirect, a transport failure or the attempt's
// own timeout is; a caller that cancelled is not; an attempt that the
// caller's deadline ended is only if the master had fairAttempt (or the
// whole attempt timeout, when shorter) to answer. Without that last rule,
// callers that waited for one shared lookup until their deadlines, then
// tried with the microseconds left, each moved the leader pointer on: a
// move check's waiters (client.locCache) walked it round the ring and
// back to a hung master, so every check hit it, for as long as it hung.
func (c *Conn) blames(ctx context.Context, redirect bool, took time.Duration) bool {
	switch {
	case redirect:
		return true
	case errors.Is(ctx.Err(), context.Canceled):
		return false
	case ctx.Err() != nil || pastDeadline(ctx):
		return took >= min(fairAttempt, c.AttemptTimeout())
	}
	return true
}

// attemptOn runs one attempt against addr under the attempt timeout.
func (c *Conn) attemptOn(ctx context.Context, addr string, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	cc, err := c.conn(addr)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout())
	defer cancel()
	return fn(actx, cc)
}

// retryable classifies a failed attempt whose caller's context is alive:
// ok reports whether another master may answer; redirect that the master
// answered NotLeader, naming hint ("" if it knows no leader).
func retryable(err error) (hint string, redirect, ok bool) {
	if h, isNL := apierr.LeaderHint(err); isNL {
		return h, true, true
	}
	var ae *apierr.Error
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &ae) && !errors.As(err, &gs) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return "", false, true // no status: the transport or the dial failed
	}
	switch apierr.CodeOf(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		// With the caller's context alive, DeadlineExceeded and Canceled
		// are the attempt's own timeout.
		return "", false, true
	}
	return "", false, false
}

// pastDeadline reports whether ctx's deadline has passed, whether or not
// its timer has fired yet.
func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// retryError is the error of a call whose context ended: the context's code
// (DeadlineExceeded or Canceled), the attempts made and the last failure.
func retryError(ctx context.Context, attempts int, last error) error {
	code, ctxErr := codes.DeadlineExceeded, ctx.Err()
	if errors.Is(ctxErr, context.Canceled) {
		code = codes.Canceled
	}
	if ctxErr == nil { // past the deadline, the timer not yet fired
		ctxErr = context.DeadlineExceeded
	}
	return &Error{code: code, ctxErr: ctxErr, Attempts: attempts, Last: last}
}

// Error is the error of a call whose context ended before a master
// answered. Its gRPC code is the context's (DeadlineExceeded or
// Canceled); errors.Is matches the context error.
type Error struct {
	code     codes.Code
	ctxErr   error
	Attempts int   // attempts made
	Last     error // the last attempt's failure; nil if none was made
}

func (e *Error) Error() string {
	if e.Last == nil {
		return fmt.Sprintf("masterconn: %v after %d attempts", e.ctxErr, e.Attempts)
	}
	return fmt.Sprintf("masterconn: %v after %d attempts; last error: %s", e.ctxErr, e.Attempts, status.Convert(e.Last).Message())
}

// Unwrap returns the context error.
func (e *Error) Unwrap() error { return e.ctxErr }

// GRPCStatus is the status a caller or handler passes on.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.code, e.Error()) }

// first is the index a call starts at.
func (c *Conn) first() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// addr returns the address at index i (mod the count) and the count.
func (c *Conn) addr(i int) (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[i%len(c.addrs)], len(c.addrs)
}

// index returns the index of addr, adding it if it is new (a leader hint
// naming a master the caller did not list).
func (c *Conn) index(addr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.addrs, addr); i >= 0 {
		return i
	}
	c.addrs = append(c.addrs, addr)
	return len(c.addrs) - 1
}

// moveFrom makes next the first master to try, unless another call moved
// on from from already.
func (c *Conn) moveFrom(from, next int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == from {
		c.leader = next
	}
}

func (c *Conn) creds() credentials.TransportCredentials {
	if c.opts.Credentials == nil {
		return tlsconf.Credentials(nil)
	}
	return c.opts.Credentials
}

func (c *Conn) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, limits.GRPCDialOptions(c.creds(), c.opts.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("masterconn: dial %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

// Close closes every connection; later calls fail with ErrClosed.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	c.conns = nil
	return errors.Join(errs...)
}
