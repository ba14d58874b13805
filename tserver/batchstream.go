package tserver

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/obs"
	"bighive/internal/wirecodec"
	pb "bighive/proto/bighivepb"
	"bighive/storage/mutation"
)

// The batch stream (BatchCommands): one long-lived stream per client
// connection carries many commands, each tagged with an id. The receive
// loop hands each message's commands out at once and reads on: the
// MutateRow commands of one tablet (and epoch) go through one
// Replica.WriteBatch (one admission, one WAL group commit, one apply
// pass), the ReadRow commands of one tablet (and epoch and selection) go
// through one multi-get (Replica.GetRows: one snapshot, the rows in key
// order). Each tablet's writes run on a goroutine of their own (each
// waits for its group commit); a message's reads all run on one, one
// group after the other (a warm read does not wait, and one goroutine per
// group made one response message per group). A group's results are
// handed to the sender together. The sender goroutine answers in batches:
// each response message holds every result that is ready when the
// previous message has been sent, and if commands are still running it
// yields once before sending, so that results finishing on the other core
// share the message (each message costs a write and a read system call on
// each side, more than a warm Get). Every command gets the status its
// unary call would have returned, so the client's retry rules are the
// same.

const (
	// batchStreamInflight bounds the commands of one stream being run or
	// answered; the receive loop waits beyond it, so a client that sends
	// faster than the tserver answers is held back by flow control.
	batchStreamInflight = 4096
	// batchResponseBytes bounds one response message (one larger result
	// goes alone; a ReadRow answer is at most maxReadRowBytes).
	batchResponseBytes = 4 << 20
)

type batchResult = pb.BatchCommandsResponse_Result

// resultStatus is a result's status: nil for OK. An absent status is OK
// (its zero value), so the common result carries none: neither side
// allocates, encodes or decodes one (a result per Put and per Get).
func resultStatus(err error) *pb.RowStatus {
	if err == nil {
		return nil
	}
	return apierr.RowStatus(err)
}

// results collects the results of one group, to be handed over together.
type results []*batchResult

func (rs *results) add(r *batchResult) { *rs = append(*rs, r) }

// BatchCommands serves one batch stream until the client closes it or it
// breaks. Work already handed out finishes (a write in the WAL is applied
// whatever happens to the stream) before it returns.
func (s *Server) BatchCommands(stream pb.TServer_BatchCommandsServer) error {
	ctx := stream.Context()
	out := make(chan results, batchStreamInflight)
	slots := make(chan struct{}, batchStreamInflight)
	emit := func(rs results) {
		if len(rs) > 0 {
			out <- rs
		}
	}
	// writing counts the write commands running: the sender waits for
	// their results to share a message only while there are some.
	var writing atomic.Int64
	senderDone := make(chan error, 1)
	go func() { senderDone <- s.sendResults(stream, out, slots, &writing) }()

	// Recv runs on its own goroutine so that the loop can also watch for
	// the tserver closing.
	msgs := make(chan *pb.BatchCommandsRequest)
	recvDone := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvDone <- err
				return
			}
			select {
			case msgs <- req:
			case <-ctx.Done():
				recvDone <- ctx.Err()
				return
			}
		}
	}()
	var wg sync.WaitGroup
	var recvErr error
loop:
	for {
		select {
		case req := <-msgs:
			for range req.Commands {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					recvErr = ctx.Err()
					break loop
				}
			}
			select {
			case <-s.draining:
				// Received but not run: refused with a routing error, which
				// tells the client that nothing was applied.
				var rs results
				for _, c := range req.Commands {
					rs.add(&batchResult{Id: c.Id, Status: resultStatus(closingErr(s, c))})
				}
				emit(rs)
				continue
			default:
			}
			s.runCommands(ctx, req.Commands, &wg, s.workers.run, emit, &writing)
		case err := <-recvDone:
			if !errors.Is(err, io.EOF) {
				recvErr = err
			}
			break loop
		case <-s.draining:
			recvErr = apierr.Unavailable("tserver %s is closing; open a new batch stream", s.addr)
			break loop
		}
	}
	wg.Wait()
	close(out)
	if err := <-senderDone; err != nil {
		return err
	}
	return recvErr
}

// sendResults sends the results of out in batches until out is closed,
// freeing a slot per result. After a failed Send it only drains out.
// writing is the number of write commands running.
func (s *Server) sendResults(stream pb.TServer_BatchCommandsServer, out <-chan results, slots <-chan struct{}, writing *atomic.Int64) error {
	var sendErr error
	for rs := range out {
		resp := &pb.BatchCommandsResponse{}
		size := 0
		take := func(rs results) {
			for _, r := range rs {
				resp.Results = append(resp.Results, r)
				size += wirecodec.Size(r)
				<-slots
			}
		}
		drain := func() bool {
			for size < batchResponseBytes {
				select {
				case rs, ok := <-out:
					if !ok {
						return false
					}
					take(rs)
				default:
					return true
				}
			}
			return true
		}
		take(rs)
		if drain() && size < batchResponseBytes && writing.Load() > 0 {
			// Writes are still running: a group commit wakes the writes of
			// every tablet at once, so let them finish and share this
			// message (each message costs a write system call here and a
			// read in the client). Reads are not waited for: yielding to
			// them delayed the answers ready now more than it saved
			// (docs/performance.md, seventh round).
			runtime.Gosched()
			drain()
		}
		if sendErr == nil {
			sendErr = stream.Send(resp)
		}
	}
	return sendErr
}

// The method names the batch stream's commands are counted under in
// bighive_grpc_server_requests_total.
const (
	batchMutateMethod = "/bighive.v1.TServer/BatchCommands/MutateRow"
	batchReadMethod   = "/bighive.v1.TServer/BatchCommands/ReadRow"
	batchPingMethod   = "/bighive.v1.TServer/BatchCommands/Ping"
)

// readPart is how many of a message's reads one goroutine runs.
const readPart = 16

// runCommands starts the commands of one message: one goroutine per
// tablet's group of writes, one per readPart of its reads. run starts each
// (s.workers.run; Command runs them in its caller's goroutine). writing,
// if not nil, counts the write commands from their start until their
// results are about to be emitted.
func (s *Server) runCommands(ctx context.Context, cmds []*pb.BatchCommandsRequest_Command, wg *sync.WaitGroup, run func(func()), emit func(results), writing *atomic.Int64) {
	// Each command is counted in the request metrics under its own
	// method name, timed from the arrival of its message.
	began := time.Now()
	counted := func(m *obs.CommandMetrics, rs *results) func(*batchResult) {
		return func(r *batchResult) {
			m.Observe(began, codes.Code(r.GetStatus().GetCode()))
			rs.add(r)
		}
	}
	type groupKey struct {
		tablet string
		epoch  int64
	}
	var groups map[groupKey][]*pb.BatchCommandsRequest_Command
	var order []groupKey
	var reads []*pb.BatchCommandsRequest_Command
	var now results // answered without running
	for _, c := range cmds {
		if err := s.checkBatchCommand(ctx, c); err != nil {
			now.add(&batchResult{Id: c.Id, Status: resultStatus(err)})
			continue
		}
		switch {
		case c.GetMutateRow() != nil:
			k := groupKey{c.GetMutateRow().TabletId, c.GetMutateRow().Epoch}
			if groups == nil {
				groups = map[groupKey][]*pb.BatchCommandsRequest_Command{}
			}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], c)
		case c.GetReadRow() != nil:
			reads = append(reads, c)
		case c.GetPing() != nil:
			counted(s.pingMetrics, &now)(&batchResult{Id: c.Id})
		default:
			now.add(&batchResult{Id: c.Id, Status: resultStatus(apierr.InvalidArgument("batch command %d names no request", c.Id))})
		}
	}
	emit(now)
	// Reads run in parts of readPart commands, each in its own goroutine:
	// callers that wait on their reads send them together, so one message
	// can hold every caller's read, and run serially they would leave the
	// other cores idle while each misses the block cache.
	for len(reads) > 0 {
		part := reads[:min(len(reads), readPart)]
		reads = reads[len(part):]
		wg.Add(1)
		run(func() {
			defer wg.Done()
			var rs results
			for _, g := range groupReads(part) {
				s.readRows(ctx, g, counted(s.readMetrics, &rs))
			}
			emit(rs)
		})
	}
	for _, k := range order {
		g := groups[k]
		wg.Add(1)
		if writing != nil {
			writing.Add(int64(len(g)))
		}
		run(func() {
			defer wg.Done()
			var rs results
			s.mutateGroup(ctx, k.tablet, k.epoch, g, counted(s.mutateMetrics, &rs))
			if writing != nil {
				// Before the emit: the sender, taking these results, sees
				// only the writes still running.
				writing.Add(-int64(len(g)))
			}
			emit(rs)
		})
	}
}

// mutateGroup runs the MutateRow commands of one tablet as one
// WriteBatch and emits each one's result.
func (s *Server) mutateGroup(ctx context.Context, tabletID string, epoch int64, cmds []*pb.BatchCommandsRequest_Command, emit func(*batchResult)) {
	// As in MutateRow: the row is checked before the tablet.
	ms := make([]*mutation.RowMutation, 0, len(cmds))
	idx := make([]int, 0, len(cmds))
	for i, c := range cmds {
		m, err := toMutation(c.GetMutateRow().Row)
		if err != nil {
			emit(&batchResult{Id: c.Id, Status: resultStatus(err)})
			continue
		}
		ms, idx = append(ms, m), append(idx, i)
	}
	if len(ms) == 0 {
		return
	}
	r, err := s.serving(tabletID, epoch)
	if err != nil {
		st := resultStatus(err)
		for _, i := range idx {
			emit(&batchResult{Id: cmds[i].Id, Status: st})
		}
		return
	}
	for k, err := range r.WriteBatch(ctx, ms) {
		emit(&batchResult{Id: cmds[idx[k]].Id, Status: resultStatus(s.tabletErr(r, err))})
	}
}

// Command runs one batch-stream command in this process, with the checks,
// metrics and write grouping of a command that came on a batch stream, and
// returns its result: a client in this process (the Cloud Bigtable API
// served by this tserver) reaches its tablets without a connection to
// itself. It implements client.LocalTServer with Addr.
func (s *Server) Command(ctx context.Context, cmd *pb.BatchCommandsRequest_Command) *pb.BatchCommandsResponse_Result {
	select {
	case <-s.draining:
		return &batchResult{Id: cmd.Id, Status: resultStatus(closingErr(s, cmd))}
	default:
	}
	var res *batchResult
	var wg sync.WaitGroup
	// One command: it runs in this goroutine (no hand-off to a worker).
	s.runCommands(ctx, []*pb.BatchCommandsRequest_Command{cmd}, &wg, func(f func()) { f() }, func(rs results) {
		if len(rs) > 0 {
			res = rs[0]
		}
	}, nil)
	wg.Wait()
	return res
}

// closingErr refuses a command that arrived after the tserver began to
// close: NOT_SERVING, so the client looks the tablet up again.
func closingErr(s *Server, c *pb.BatchCommandsRequest_Command) error {
	tablet, epoch := c.GetMutateRow().GetTabletId(), c.GetMutateRow().GetEpoch()
	if c.GetReadRow() != nil {
		tablet, epoch = c.GetReadRow().TabletId, c.GetReadRow().Epoch
	}
	return apierr.Tablet(pb.TabletError_NOT_SERVING, tablet, epoch, "tserver %s is closing", s.addr)
}
