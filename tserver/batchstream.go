package tserver

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	"bighive/internal/mutation"
	"bighive/internal/obs"
	pb "bighive/proto/bighivepb"
)

// The batch stream (BatchCommands): one long-lived stream per client
// connection carries many commands, each tagged with an id. The receive
// loop hands each message's commands out at once and reads on: the
// MutateRow commands of one tablet (and epoch) go through one
// Replica.WriteBatch (one admission, one WAL group commit, one apply
// pass), the ReadRow commands of one tablet (and epoch and selection) go
// through one multi-get (Replica.GetRows: one snapshot, the rows in key
// order), each group on its own goroutine. A sender goroutine
// answers in batches: each response message holds every result that is
// ready when the previous message has been sent. Every command gets the
// status its unary call would have returned, so the client's retry rules
// are the same.

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

// BatchCommands serves one batch stream until the client closes it or it
// breaks. Work already handed out finishes (a write in the WAL is applied
// whatever happens to the stream) before it returns.
func (s *Server) BatchCommands(stream pb.TServer_BatchCommandsServer) error {
	ctx := stream.Context()
	out := make(chan *batchResult, batchStreamInflight)
	slots := make(chan struct{}, batchStreamInflight)
	emit := func(r *batchResult) {
		out <- r
	}
	senderDone := make(chan error, 1)
	go func() { senderDone <- s.sendResults(stream, out, slots) }()

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
				for _, c := range req.Commands {
					emit(&batchResult{Id: c.Id, Status: apierr.RowStatus(closingErr(s, c))})
				}
				continue
			default:
			}
			s.runCommands(ctx, req.Commands, &wg, emit)
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
func (s *Server) sendResults(stream pb.TServer_BatchCommandsServer, out <-chan *batchResult, slots <-chan struct{}) error {
	var sendErr error
	for r := range out {
		resp := &pb.BatchCommandsResponse{Results: []*batchResult{r}}
		size := proto.Size(r)
		<-slots
	more:
		for size < batchResponseBytes {
			select {
			case r, ok := <-out:
				if !ok {
					break more
				}
				resp.Results = append(resp.Results, r)
				size += proto.Size(r)
				<-slots
			default:
				break more
			}
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

// runCommands starts the commands of one message: one goroutine per
// tablet's group of writes, one per tablet's group of reads.
func (s *Server) runCommands(ctx context.Context, cmds []*pb.BatchCommandsRequest_Command, wg *sync.WaitGroup, emit func(*batchResult)) {
	// Each command is counted in the request metrics under its own
	// method name, timed from the arrival of its message.
	began := time.Now()
	counted := func(m *obs.CommandMetrics) func(*batchResult) {
		return func(r *batchResult) {
			m.Observe(began, codes.Code(r.GetStatus().GetCode()))
			emit(r)
		}
	}
	emitWrite, emitRead, emitPing := counted(s.mutateMetrics), counted(s.readMetrics), counted(s.pingMetrics)
	type groupKey struct {
		tablet string
		epoch  int64
	}
	var groups map[groupKey][]*pb.BatchCommandsRequest_Command
	var order []groupKey
	var reads []*pb.BatchCommandsRequest_Command
	for _, c := range cmds {
		if err := s.checkBatchCommand(ctx, c); err != nil {
			emit(&batchResult{Id: c.Id, Status: apierr.RowStatus(err)})
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
			emitPing(&batchResult{Id: c.Id, Status: &pb.RowStatus{}})
		default:
			emit(&batchResult{Id: c.Id, Status: apierr.RowStatus(apierr.InvalidArgument("batch command %d names no request", c.Id))})
		}
	}
	for _, g := range groupReads(reads) {
		wg.Add(1)
		s.workers.run(func() {
			defer wg.Done()
			s.readRows(ctx, g, emitRead)
		})
	}
	for _, k := range order {
		g := groups[k]
		wg.Add(1)
		s.workers.run(func() {
			defer wg.Done()
			s.mutateGroup(ctx, k.tablet, k.epoch, g, emitWrite)
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
			emit(&batchResult{Id: c.Id, Status: apierr.RowStatus(err)})
			continue
		}
		ms, idx = append(ms, m), append(idx, i)
	}
	if len(ms) == 0 {
		return
	}
	r, err := s.serving(tabletID, epoch)
	if err != nil {
		st := apierr.RowStatus(err)
		for _, i := range idx {
			emit(&batchResult{Id: cmds[i].Id, Status: st})
		}
		return
	}
	for k, err := range r.WriteBatch(ctx, ms) {
		emit(&batchResult{Id: cmds[idx[k]].Id, Status: apierr.RowStatus(s.writeErr(r, err))})
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
		return &batchResult{Id: cmd.Id, Status: apierr.RowStatus(closingErr(s, cmd))}
	default:
	}
	var res *batchResult
	var wg sync.WaitGroup
	s.runCommands(ctx, []*pb.BatchCommandsRequest_Command{cmd}, &wg, func(r *batchResult) { res = r })
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
