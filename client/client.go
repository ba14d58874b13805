package client

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"bighive/internal/limits"
	"bighive/internal/masterconn"
	pb "bighive/proto/bighivepb"
)

// Client is a connection to a Bighive cluster: its masters and, as tablets
// are found, its tservers. It is safe for concurrent use.
type Client struct {
	opts options

	master *masterconn.Conn // the leader-following master connection

	mu     sync.Mutex
	closed bool
	conns  map[string]*grpc.ClientConn // tservers by address
	tables map[string]*locCache

	coalesce *coalescer    // nil: write coalescing is off
	batch    *batchStreams // nil: the batch stream is off (unary calls)
}

type options struct {
	minBackoff, maxBackoff time.Duration
	retryTimeout           time.Duration
	attemptTimeout         time.Duration
	moveCheck              time.Duration
	prefetch               uint32
	bulkConcurrency        int
	coalesceWrites         bool
	batchStream            bool
	noFlatScan             bool
	dialOpts               []grpc.DialOption
	creds                  credentials.TransportCredentials // nil: plaintext
	local                  []LocalTServer                   // tservers in this process (WithLocalTServer)
	log                    *slog.Logger
	now                    func() time.Time
}

// Option configures a Client.
type Option func(*options)

// WithBackoff sets the first and the largest wait between retries
// (default 10 ms and 1 s).
func WithBackoff(min, max time.Duration) Option {
	return func(o *options) { o.minBackoff, o.maxBackoff = min, max }
}

// WithRetryTimeout bounds the retries of a call whose context has no
// deadline (default 30 s). A context deadline always wins.
func WithRetryTimeout(d time.Duration) Option { return func(o *options) { o.retryTimeout = d } }

// WithAttemptTimeout bounds one attempt of a call, so a server that stopped
// answering (paused, partitioned) is given up on and the call retried
// elsewhere (default 5 s). For a scan it bounds the silence between two
// messages of the stream. A non-idempotent write sent on the batch stream
// waits for its answer past it, until the call's deadline (no retry may
// follow it), and a call whose tablet moved stops waiting before it
// (WithMoveCheck).
func WithAttemptTimeout(d time.Duration) Option { return func(o *options) { o.attemptTimeout = d } }

// WithMoveCheck sets how long a call on the batch stream (Put, Apply of a
// plain mutation, Get) waits for its tserver before it checks with the
// master that its tablet is still there, and then how often it checks
// again (default 1 s, well under the tserver's lease; 0: never). When
// the tablet moved, the call stops waiting: a read, an idempotent write
// and any write that was not sent yet are retried on the new owner at
// once; a sent non-idempotent write is answered Unavailable, its outcome
// unknown. A scan checks likewise after that long without a message, and
// so do ApplyBulk, conditional mutations and read-modify-writes.
func WithMoveCheck(d time.Duration) Option { return func(o *options) { o.moveCheck = max(d, 0) } }

// WithLocationPrefetch sets how many tablet locations one master lookup
// asks for (default 32).
func WithLocationPrefetch(n int) Option { return func(o *options) { o.prefetch = uint32(max(n, 1)) } }

// WithBulkConcurrency bounds the tablets ApplyBulk writes to at once
// (default 16).
func WithBulkConcurrency(n int) Option { return func(o *options) { o.bulkConcurrency = max(n, 1) } }

// WithWriteCoalescing turns write coalescing on or off (default on; it
// applies only with the batch stream off, WithBatchStream(false)):
// concurrent Puts and idempotent Applies to one tablet that arrive while a
// write to it is in flight are sent together in its next MutateRows. Each
// call still returns once its own row is durable, with its own error. See
// the package documentation.
func WithWriteCoalescing(on bool) Option { return func(o *options) { o.coalesceWrites = on } }

// LocalTServer is a tserver in the caller's own process: a tserver that
// serves the Cloud Bigtable API through a Client of its own reaches its
// own tablets through it, without a connection to itself.
type LocalTServer interface {
	// Addr is the address the tserver is registered at ("" until it is
	// known: calls then go over gRPC).
	Addr() string
	// Command runs one command as the tserver's batch stream would, and
	// returns its result (the Id is not used).
	Command(ctx context.Context, cmd *pb.BatchCommandsRequest_Command) *pb.BatchCommandsResponse_Result
}

// LocalScanner is a LocalTServer that also scans in this process: recv
// returns the scan's messages as ScanRows' stream would, io.EOF after the
// last. The end of ctx stops the scan.
type LocalScanner interface {
	ScanLocal(ctx context.Context, req *pb.ScanRowsRequest) (recv func() (*pb.ScanRowsResponse, error))
}

// WithLocalTServer sends the Puts, Applies, Gets and Pings for the tablets
// of the tserver t, which runs in this process, to t directly, with the
// same outcomes and retries as over the batch stream, and the scans too
// if t is a LocalScanner. Other calls (bulk writes, conditional and
// read-modify-write mutations) and other tservers go over gRPC as usual.
// Given several times, it adds each.
func WithLocalTServer(t LocalTServer) Option {
	return func(o *options) { o.local = append(o.local, t) }
}

// WithBatchStream turns the batch stream on or off (default on): Puts,
// Applies and Gets go to each tserver on one long-lived stream that
// carries the calls of concurrent callers together, each with its own
// result (see the package documentation, "Batch stream"). Off, each is
// one unary RPC, coalesced as WithWriteCoalescing says; with the stream
// on, write coalescing is not used.
func WithBatchStream(on bool) Option { return func(o *options) { o.batchStream = on } }

// WithFlatScan turns the flat scan encoding on or off (default on): a
// scan asks the tserver for its rows as one contiguous buffer per message
// (ScanRowsResponse.chunk) instead of a message per row and cell, which
// costs both sides fewer allocations. Off, or against a tserver that does
// not know it, the rows come as Row messages.
func WithFlatScan(on bool) Option { return func(o *options) { o.noFlatScan = !on } }

// WithGRPCDialOptions adds options to every connection the client opens.
func WithGRPCDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// WithLogger sets the logger for retries (debug level) and oddities.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// withClock replaces the clock Put reads its timestamps from (tests).
func withClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Dial returns a client of the cluster whose masters listen at the given
// addresses (host:port; one or more, in any order). Dial does not wait
// for the cluster: connections are made as calls need them, and the first
// master call finds the leader. ctx is not retained.
func Dial(ctx context.Context, masters []string, opts ...Option) (*Client, error) {
	o := options{
		minBackoff:      10 * time.Millisecond,
		maxBackoff:      time.Second,
		retryTimeout:    30 * time.Second,
		attemptTimeout:  5 * time.Second,
		moveCheck:       time.Second,
		prefetch:        32,
		bulkConcurrency: 16,
		coalesceWrites:  true,
		batchStream:     true,
		log:             slog.Default(),
		now:             time.Now,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if err := ctx.Err(); err != nil {
		return nil, statusError(err, "client: dial")
	}
	var addrs []string
	seen := map[string]bool{}
	for _, m := range masters {
		m = strings.TrimSpace(m)
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		addrs = append(addrs, m)
	}
	if len(addrs) == 0 {
		return nil, status.Error(codes.InvalidArgument, "client: dial: no master addresses given")
	}
	mc, err := masterconn.New(addrs, masterconn.Options{
		AttemptTimeout: o.attemptTimeout, MinBackoff: o.minBackoff, MaxBackoff: o.maxBackoff,
		Credentials: o.transportCredentials(), DialOptions: o.dialOpts, Logger: o.log,
	})
	if err != nil {
		return nil, statusError(err, "client: dial")
	}
	c := &Client{
		opts:   o,
		master: mc,
		conns:  map[string]*grpc.ClientConn{},
		tables: map[string]*locCache{},
	}
	switch {
	case o.batchStream:
		c.batch = newBatchStreams(c)
	case o.coalesceWrites:
		c.coalesce = newCoalescer(c)
	}
	return c, nil
}

// Close closes every connection. Calls in flight fail; the Client cannot be
// used afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.batch != nil {
		c.batch.close()
	}
	errs := []error{c.master.Close()}
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	c.conns = nil
	return errors.Join(errs...)
}

// errClosed is FailedPrecondition so that no retry loop spins on it.
var errClosed = status.Error(codes.FailedPrecondition, "client: the client is closed")

// conn returns the shared connection to the tserver at addr.
func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, limits.GRPCDialOptions(c.opts.transportCredentials(), c.opts.dialOpts...)...)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "client: address %q: %v", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

func (c *Client) tserver(addr string) (pb.TServerClient, error) {
	cc, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewTServerClient(cc), nil
}

// withDeadline gives ctx the retry timeout when it has no deadline (and
// marks it so: ownDeadline).
func (c *Client) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithValue(ctx, retryTimeoutKey{}, true), c.opts.retryTimeout)
}

// callKind is what a call does, which decides how its failures are
// retried and answered (see the package documentation, "Retry rules").
type callKind int

const (
	// read changes nothing: retried on any retryable failure.
	read callKind = iota
	// write is idempotent: retried on any retryable failure, but an
	// attempt that may have applied it makes its outcome unknown until one
	// succeeds.
	write
	// writeOnce is not idempotent: retried only after a failure that
	// proves it was not applied.
	writeOnce
)

func (k callKind) idempotent() bool { return k != writeOnce }

// do runs op until it succeeds, fails permanently, or ctx runs out, with
// backoff between attempts. op gets a context bounded by the attempt
// timeout and a peer to pass as grpc.Peer, which tells whether the request
// reached a server. The error returned is a status prefixed by prefix(),
// which is called only when there is an error to return; its code follows
// deadlineError when time ran out, and a write that may have been applied
// and may not be retried is Unavailable saying its outcome is unknown
// (unknownOutcome), whatever its last attempt's code.
//
// The retry timeout (ctx's deadline, or the client's retry timeout when
// ctx has none) is kept as a time, not a context: each attempt gets one
// context whose deadline is the sooner of its attempt timeout and the
// retry timeout, so a call that succeeds at once makes one timer, not two.
// The attempt also carries the retry timeout (attemptCtx.final): a
// non-idempotent write sent on the batch stream waits for its answer
// until then, not only for the attempt timeout, since no retry may follow
// it.
func (c *Client) do(ctx context.Context, prefix func() string, k callKind, op func(ctx context.Context, p *peer.Peer) error) error {
	now := time.Now() // the first attempt's start too: one clock read per call that succeeds at once
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = now.Add(c.opts.retryTimeout)
	}
	bo := newBackoff(c.opts.minBackoff, c.opts.maxBackoff)
	var last error
	unknown := false // an attempt may have applied the write
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			now = time.Now()
		}
		ad := now.Add(c.opts.attemptTimeout)
		if deadline.Before(ad) {
			ad = deadline
		}
		actx := newAttemptCtx(ctx, now, ad)
		actx.final, actx.keep = deadline, k == writeOnce
		var p peer.Peer
		err := op(actx, &p)
		actx.release()
		if err == nil {
			return nil
		}
		f := classifyErr(err, p.Addr != nil)
		unknown = unknown || k != read && f == ambiguous
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return deadlineError(ctx, prefix(), attempt, cmp.Or(last, err), unknown)
		}
		if !f.retry(k.idempotent()) {
			if f == ambiguous {
				return unknownOutcome(prefix(), err)
			}
			return statusError(err, prefix())
		}
		last = err
		c.opts.log.Debug("client: retrying", "op", prefix(), "attempt", attempt, "err", err)
		if sleep(ctx, min(bo.next(), time.Until(deadline))) != nil || !time.Now().Before(deadline) {
			return deadlineError(ctx, prefix(), attempt, last, unknown)
		}
	}
}

// retryable reports whether a failed attempt may be retried by some
// request: the location it used should be dropped from the cache.
func retryable(err error) bool { return classifyErr(err, true) != permanent }
