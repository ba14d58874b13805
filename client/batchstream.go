package client

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
	"bighive/internal/wirecodec"
	pb "bighive/proto/bighivepb"
)

// The batch stream (see the package documentation, "Batch stream").
//
// A Client keeps one BatchCommands stream per tserver address, opened on
// first use and again after it broke. A call (MutateRow, ReadRow) gets an
// id and joins the stream's pending list; one sender goroutine per stream
// takes everything pending, sends it as one message and goes back for
// what arrived meanwhile, so a message holds the calls that came while
// the previous one was being sent and a lone call goes at once. One
// receiver goroutine hands each result to its caller by id.
//
// Outcomes keep the unary calls' retry classes: a result carries the
// status the unary call would have returned (code, message, TabletError);
// a call still pending when the stream broke was never sent (safe to
// retry); a sent call whose result never came, because the stream broke
// or the attempt timed out, has an unknown outcome, as a unary call lost
// in flight.

const (
	// batchMaxCommands bounds the commands of one message.
	batchMaxCommands = 1024
)

// batchStreams are a Client's batch streams, by tserver address.
type batchStreams struct {
	c *Client

	mu     sync.Mutex
	closed bool
	conns  map[string]*batchConn
}

// batchConn is the stream of one tserver address, reopened after a break.
type batchConn struct {
	bs   *batchStreams
	addr string
	peer net.Addr // streamAddr(addr), made once: a conversion per call allocated

	mu      sync.Mutex
	sess    *batchSession // the open stream, nil when none
	opening chan struct{} // closed when the open in progress ends
	openErr error         // the last open's failure
}

// batchSession is one open stream.
type batchSession struct {
	bc     *batchConn
	stream pb.TServer_BatchCommandsClient
	cancel context.CancelFunc
	wake   chan struct{} // capacity 1: wakes the sender

	mu      sync.Mutex
	err     error // set once the stream broke; no new call joins it
	nextID  uint64
	pending []*streamCall          // not yet taken by the sender
	calls   map[uint64]*streamCall // pending or sent, not yet answered
}

// streamCall is one caller's command.
type streamCall struct {
	ctx  context.Context // the caller's
	a    *attemptCtx     // the attempt; nil: ctx carries its own deadline
	cmd  *pb.BatchCommandsRequest_Command
	size int
	// Guarded by batchSession.mu:
	sent  bool      // taken into a message
	check time.Time // when the caller should next check that its tablet did not move; zero: never
	// done gets the call's one result, and before it at most one
	// overdue notice at a time (a check is due): capacity 2.
	done chan streamResult
}

// The stream's results leave their bytes in the buffer their message was
// received in (wirecodec.Alias): a Get's values are returned as they are,
// not copied out of the message first. A value kept by the caller keeps
// that message's buffer alive (the results of the calls answered with it).
func init() { wirecodec.Alias(&pb.BatchCommandsResponse{}) }

type streamResult struct {
	res     *pb.BatchCommandsResponse_Result
	err     error
	sent    bool
	overdue bool // not a result: the caller should check its tablet (attemptCtx.moved)
}

// streamAddr stands for the tserver in a peer.Peer of a streamed call:
// the retry rules read only whether it is set.
type streamAddr string

func (a streamAddr) Network() string { return "tcp" }
func (a streamAddr) String() string  { return string(a) }

func newBatchStreams(c *Client) *batchStreams {
	return &batchStreams{c: c, conns: map[string]*batchConn{}}
}

// close ends every stream; calls waiting on them fail.
func (bs *batchStreams) close() {
	bs.mu.Lock()
	bs.closed = true
	conns := bs.conns
	bs.conns = nil
	bs.mu.Unlock()
	for _, bc := range conns {
		bc.mu.Lock()
		sess := bc.sess
		bc.mu.Unlock()
		if sess != nil {
			sess.broke(errClosed)
		}
	}
}

// call sends cmd to the tserver at addr on its stream and returns its
// result's error (nil: OK) and the result. It sets p.Addr once the
// command was taken into a message (the unary calls' "reached a transport
// stream"), which the retry rules read.
func (bs *batchStreams) call(ctx context.Context, addr string, cmd *pb.BatchCommandsRequest_Command, p *peer.Peer) (*pb.BatchCommandsResponse_Result, error) {
	bs.mu.Lock()
	if bs.closed {
		bs.mu.Unlock()
		return nil, errClosed
	}
	bc := bs.conns[addr]
	if bc == nil {
		bc = &batchConn{bs: bs, addr: addr, peer: streamAddr(addr)}
		bs.conns[addr] = bc
	}
	bs.mu.Unlock()
	// The call waits on its caller's context; its session ends it at the
	// attempt's deadline and tells it when to check that its tablet did
	// not move (expire), with no timer of its own.
	wait, a := splitAttempt(ctx)
	sc := &streamCall{ctx: wait, a: a, cmd: cmd, size: wirecodec.Size(cmd), done: make(chan streamResult, 2)}
	every := bs.c.opts.moveCheck
	if a != nil && a.loc != nil && every > 0 {
		sc.check = a.start.Add(every)
	}
	var sess *batchSession
	for range 2 { // a stream that broke just now is replaced once
		var err error
		if sess, err = bc.session(ctx, a, every); err != nil {
			return nil, err
		}
		if sess.add(sc) {
			break
		}
		sess = nil
	}
	if sess == nil {
		return nil, status.Errorf(codes.Unavailable, "client: the batch stream to %s broke before the call was sent", addr)
	}
	var out streamResult
	for {
		select {
		case out = <-sc.done:
		case <-wait.Done():
			out = sess.abandon(sc, wait.Err())
		}
		if !out.overdue {
			break
		}
		if !a.moved(wait, every) {
			sess.recheck(sc, time.Now().Add(every))
			continue
		}
		// The tablet is elsewhere now: stop waiting here. Unsent, the call
		// never reached this tserver and is re-sent where the tablet is;
		// sent, its outcome is unknown (retried only if idempotent).
		out = sess.abandon(sc, movedError(a, addr))
		break
	}
	if out.sent {
		p.Addr = bc.peer
	}
	if out.err != nil {
		return nil, out.err
	}
	return out.res, apierr.FromRowStatus(out.res.Status)
}

// movedError is the failure of an attempt a that stopped waiting for the
// tserver at addr because its tablet moved.
func movedError(a *attemptCtx, addr string) error {
	return status.Errorf(codes.Unavailable, "client: tablet %s moved from tserver %s (epoch %d) while the call waited for it",
		a.loc.tabletID, addr, a.loc.epoch)
}

// session returns the open stream, opening one if none is (callers wait
// for one open in progress, until ctx ends). A caller that waits for the
// open checks every interval, from its attempt's start, that its tablet
// did not move (attemptCtx.moved), and gives up, unsent, if it did: a
// timer, but only while a stream opens, off the fast path.
func (bc *batchConn) session(ctx context.Context, a *attemptCtx, every time.Duration) (*batchSession, error) {
	var check *time.Timer
	for {
		bc.mu.Lock()
		if bc.sess != nil {
			s := bc.sess
			bc.mu.Unlock()
			return s, nil
		}
		ch := bc.opening
		if ch == nil {
			ch = make(chan struct{})
			bc.opening, bc.openErr = ch, nil
			go bc.open(ch)
		}
		bc.mu.Unlock()
		if check == nil && a != nil && a.loc != nil && every > 0 {
			check = time.NewTimer(max(time.Until(a.start.Add(every)), 0))
			defer check.Stop()
		}
		var due <-chan time.Time
		if check != nil {
			due = check.C
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-due:
			if a.moved(a.Context, every) {
				return nil, unsent(movedError(a, bc.addr))
			}
			check.Reset(every)
			continue
		}
		bc.mu.Lock()
		err := bc.openErr
		bc.mu.Unlock()
		if err != nil {
			// No command was sent: a retry is safe.
			return nil, unsent(err)
		}
	}
}

// open opens a stream, bounded by the attempt timeout, and starts its
// sender and receiver.
func (bc *batchConn) open(ch chan struct{}) {
	var sess *batchSession
	ts, err := bc.bs.c.tserver(bc.addr)
	if err == nil {
		sctx, cancel := context.WithCancel(context.Background())
		defer func() {
			if sess == nil {
				cancel()
			}
		}()
		type opened struct {
			st  pb.TServer_BatchCommandsClient
			err error
		}
		res := make(chan opened, 1)
		timer := time.NewTimer(bc.bs.c.opts.attemptTimeout)
		defer timer.Stop()
		go func() {
			st, err := ts.BatchCommands(sctx)
			res <- opened{st, err}
		}()
		select {
		case o := <-res:
			err = o.err
			if err == nil {
				sess = &batchSession{bc: bc, stream: o.st, cancel: cancel, wake: make(chan struct{}, 1), calls: map[uint64]*streamCall{}}
			}
		case <-timer.C:
			err = status.Errorf(codes.Unavailable, "client: opening the batch stream to %s took over %v", bc.addr, bc.bs.c.opts.attemptTimeout)
		}
	}
	bc.bs.mu.Lock()
	if bc.bs.closed && sess != nil {
		sess.cancel()
		sess, err = nil, errClosed
	}
	bc.bs.mu.Unlock()
	bc.mu.Lock()
	bc.sess, bc.openErr, bc.opening = sess, err, nil
	bc.mu.Unlock()
	close(ch)
	if sess != nil {
		go sess.send()
		go sess.receive()
		go sess.expire(expireTick(bc.bs.c.opts.attemptTimeout))
	}
}

// expireTick is how often a session looks for calls past their attempt's
// deadline: a twentieth of the attempt timeout, within 5-100 ms.
func expireTick(attempt time.Duration) time.Duration {
	return min(max(attempt/20, 5*time.Millisecond), 100*time.Millisecond)
}

// expire, every tick until the stream ends, tells the calls whose move
// check is due (streamCall.check) to make it, and ends the calls whose
// attempt deadline passed: a call not yet sent is dropped (it never will
// be), a sent one has an unknown outcome; both get DeadlineExceeded, as a
// call whose attempt ran out. A sent call of a non-idempotent write
// (attemptCtx.keep) waits for its answer until the call's retry deadline
// (attemptCtx.final) instead: no retry may follow it.
func (s *batchSession) expire(tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.stream.Context().Done():
			return
		}
		now := time.Now()
		s.mu.Lock()
		for id, sc := range s.calls {
			if !sc.check.IsZero() && !now.Before(sc.check) {
				sc.check = time.Time{} // until the caller asks again (recheck)
				sc.done <- streamResult{overdue: true}
			}
			if sc.a == nil {
				continue // ctx's own deadline ends it
			}
			limit := sc.a.deadline
			if sc.sent && sc.a.keep {
				limit = sc.a.final
			}
			if now.Before(limit) {
				continue
			}
			delete(s.calls, id)
			if !sc.sent {
				s.unqueue(sc)
			}
			sc.done <- streamResult{err: status.Errorf(codes.DeadlineExceeded,
				"client: tserver %s did not answer within the attempt's deadline", s.bc.addr), sent: sc.sent}
		}
		s.mu.Unlock()
	}
}

// add queues sc; false if the stream already broke.
func (s *batchSession) add(sc *streamCall) bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	s.nextID++
	sc.cmd.Id = s.nextID
	s.calls[sc.cmd.Id] = sc
	s.pending = append(s.pending, sc)
	first := len(s.pending) == 1
	s.mu.Unlock()
	if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// abandon ends sc's wait when its caller's context ended or its tablet
// moved: a call not yet sent is dropped (it never will be); a sent one
// has an unknown outcome.
func (s *batchSession) abandon(sc *streamCall, err error) streamResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(sc.done) > 0 { // s.mu held: nothing is sent on it meanwhile
		if out := <-sc.done; !out.overdue { // answered meanwhile
			return out
		}
	}
	delete(s.calls, sc.cmd.Id)
	if !sc.sent {
		s.unqueue(sc)
	}
	return streamResult{err: err, sent: sc.sent}
}

// recheck sets when sc's caller should next check its tablet, if sc still
// waits for its result.
func (s *batchSession) recheck(sc *streamCall, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls[sc.cmd.Id] == sc {
		sc.check = at
	}
}

// unqueue removes sc from the pending list. The caller holds s.mu.
func (s *batchSession) unqueue(sc *streamCall) {
	for i, q := range s.pending {
		if q == sc {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			return
		}
	}
}

// send is the sender: it sends what is pending, one message at a time.
func (s *batchSession) send() {
	for {
		select {
		case <-s.wake:
		case <-s.stream.Context().Done():
			return
		}
		// Let the callers woken with this one (a group commit answers
		// many at once) add their commands first: each message costs a
		// write system call here and a read on the tserver, more than the
		// command itself.
		runtime.Gosched()
		for {
			msg := s.take()
			if msg == nil {
				break
			}
			if err := s.stream.Send(msg); err != nil {
				if errors.Is(err, io.EOF) {
					// The stream ended; Recv has its status.
					err = status.Errorf(codes.Unavailable, "client: the batch stream to %s ended", s.bc.addr)
				}
				s.broke(err)
				return
			}
		}
	}
}

// take removes the next message's commands from the pending list and
// marks them sent; nil when nothing is pending or the stream broke.
func (s *batchSession) take() *pb.BatchCommandsRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || len(s.pending) == 0 {
		return nil
	}
	msg := &pb.BatchCommandsRequest{}
	n, size := 0, 0
	for n < len(s.pending) {
		sc := s.pending[n]
		if len(msg.Commands) > 0 && (len(msg.Commands) == batchMaxCommands || size+sc.size > maxBatchBytes) {
			break
		}
		n++
		if sc.ctx.Err() != nil {
			continue // its caller is gone; abandon removes it from calls
		}
		sc.sent = true
		msg.Commands = append(msg.Commands, sc.cmd)
		size += sc.size
	}
	clear(s.pending[:n])
	s.pending = s.pending[n:]
	if len(s.pending) == 0 {
		s.pending = nil
	}
	if len(msg.Commands) == 0 {
		return nil
	}
	return msg
}

// receive hands each result to its caller until the stream ends.
func (s *batchSession) receive() {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = status.Errorf(codes.Unavailable, "client: the tserver %s ended the batch stream", s.bc.addr)
			}
			s.broke(err)
			return
		}
		s.mu.Lock()
		for _, r := range resp.Results {
			if sc, ok := s.calls[r.Id]; ok {
				delete(s.calls, r.Id)
				sc.done <- streamResult{res: r, sent: true}
			}
		}
		s.mu.Unlock()
	}
}

// broke fails the stream once: every call waiting on it gets err, as an
// Unavailable whose outcome is unknown if it was sent, and the next call
// opens a new stream.
func (s *batchSession) broke(cause error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	// A new status, not the cause's: whatever detail the cause carries,
	// a sent command's outcome is unknown.
	if errors.Is(cause, errClosed) {
		s.err = errClosed
	} else {
		s.err = status.Errorf(codes.Unavailable, "client: the batch stream to %s broke: %s", s.bc.addr, status.Convert(cause).Message())
	}
	calls := s.calls
	s.calls, s.pending = nil, nil
	for _, sc := range calls {
		sc.done <- streamResult{err: s.err, sent: sc.sent}
	}
	s.mu.Unlock()
	s.cancel()
	s.bc.mu.Lock()
	if s.bc.sess == s {
		s.bc.sess = nil
	}
	s.bc.mu.Unlock()
}

// commandPath reports whether a call to the tserver at addr goes as one
// command (command): to the local tserver, or on the batch stream.
func (c *Client) commandPath(addr string) bool {
	return c.batch != nil || c.localTServer(addr) != nil
}

// scanRows starts a scan of the tserver at addr: in this process when it
// is a local LocalScanner, else over gRPC. It returns the stream's Recv.
func (c *Client) scanRows(ctx context.Context, addr string, req *pb.ScanRowsRequest) (func() (*pb.ScanRowsResponse, error), error) {
	if l, ok := c.localTServer(addr).(LocalScanner); ok {
		return l.ScanLocal(ctx, req), nil
	}
	ts, err := c.tserver(addr)
	if err != nil {
		return nil, err
	}
	stream, err := ts.ScanRows(ctx, req)
	if err != nil {
		return nil, err
	}
	return stream.Recv, nil
}

// localTServer returns the tserver of this process at addr, nil if none.
func (c *Client) localTServer(addr string) LocalTServer {
	for _, l := range c.opts.local {
		if l.Addr() == addr {
			return l
		}
	}
	return nil
}

// command runs one command on the tserver at addr: in this process when
// it is the local tserver (WithLocalTServer), else on the batch stream.
func (c *Client) command(ctx context.Context, addr string, cmd *pb.BatchCommandsRequest_Command, p *peer.Peer) (*pb.BatchCommandsResponse_Result, error) {
	if l := c.localTServer(addr); l != nil {
		res := l.Command(ctx, cmd)
		p.Addr = streamAddr(addr) // it reached the tserver: its outcome is the result's
		return res, apierr.FromRowStatus(res.GetStatus())
	}
	return c.batch.call(ctx, addr, cmd, p)
}

// mutateRow is MutateRow on the batch stream when it is on, else unary.
func (c *Client) mutateRow(ctx context.Context, addr string, req *pb.MutateRowRequest, p *peer.Peer) error {
	if c.commandPath(addr) {
		_, err := c.command(ctx, addr, &pb.BatchCommandsRequest_Command{
			Command: &pb.BatchCommandsRequest_Command_MutateRow{MutateRow: req}}, p)
		return err
	}
	ts, err := c.tserver(addr)
	if err != nil {
		return err
	}
	_, err = ts.MutateRow(ctx, req, grpc.Peer(p))
	return err
}

// readRow is ReadRow on the batch stream when it is on, else unary.
func (c *Client) readRow(ctx context.Context, addr string, req *pb.ReadRowRequest, p *peer.Peer) (*pb.ReadRowResponse, error) {
	if c.commandPath(addr) {
		res, err := c.command(ctx, addr, &pb.BatchCommandsRequest_Command{
			Command: &pb.BatchCommandsRequest_Command_ReadRow{ReadRow: req}}, p)
		if err != nil {
			return nil, err
		}
		if res.ReadRow == nil {
			return nil, status.Errorf(codes.Internal, "client: tserver %s answered a ReadRow command without a row", addr)
		}
		return res.ReadRow, nil
	}
	ts, err := c.tserver(addr)
	if err != nil {
		return nil, err
	}
	return ts.ReadRow(ctx, req, grpc.Peer(p))
}

// ping is Ping on the batch stream when it is on, else unary: the floor of
// the transport the data calls use.
func (c *Client) ping(ctx context.Context, addr string, p *peer.Peer) error {
	if c.commandPath(addr) {
		_, err := c.command(ctx, addr, &pb.BatchCommandsRequest_Command{
			Command: &pb.BatchCommandsRequest_Command_Ping{Ping: &pb.PingRequest{}}}, p)
		return err
	}
	ts, err := c.tserver(addr)
	if err != nil {
		return err
	}
	_, err = ts.Ping(ctx, &pb.PingRequest{}, grpc.Peer(p))
	return err
}
