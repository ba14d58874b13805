package clienttest

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

// BatchCommands serves the batch stream: each command runs on its own
// goroutine as the unary call it carries, through the same fault
// injection (a Fault for "MutateRow" or "ReadRow" matches a command too,
// and Calls counts it), and is answered in a message of its own. A fault
// for "BatchCommands" fails the stream when it opens.
func (s *tserver) BatchCommands(stream pb.TServer_BatchCommandsServer) error {
	ctx := stream.Context()
	var sendMu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, cmd := range req.Commands {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := s.runCommand(ctx, cmd)
				sendMu.Lock()
				defer sendMu.Unlock()
				stream.Send(&pb.BatchCommandsResponse{Results: []*pb.BatchCommandsResponse_Result{res}})
			}()
		}
	}
}

func (s *tserver) runCommand(ctx context.Context, cmd *pb.BatchCommandsRequest_Command) *pb.BatchCommandsResponse_Result {
	res := &pb.BatchCommandsResponse_Result{Id: cmd.Id}
	var out any
	var err error
	switch {
	case cmd.GetMutateRow() != nil:
		out, err = s.c.unaryFaults(ctx, cmd.GetMutateRow(), &grpc.UnaryServerInfo{Server: s, FullMethod: "/bighive.v1.TServer/MutateRow"},
			func(ctx context.Context, req any) (any, error) { return s.MutateRow(ctx, req.(*pb.MutateRowRequest)) })
	case cmd.GetReadRow() != nil:
		out, err = s.c.unaryFaults(ctx, cmd.GetReadRow(), &grpc.UnaryServerInfo{Server: s, FullMethod: "/bighive.v1.TServer/ReadRow"},
			func(ctx context.Context, req any) (any, error) { return s.ReadRow(ctx, req.(*pb.ReadRowRequest)) })
		if err == nil {
			res.ReadRow = out.(*pb.ReadRowResponse)
		}
	case cmd.GetPing() != nil:
		_, err = s.c.unaryFaults(ctx, cmd.GetPing(), &grpc.UnaryServerInfo{Server: s, FullMethod: "/bighive.v1.TServer/Ping"},
			func(ctx context.Context, req any) (any, error) { return s.Ping(ctx, req.(*pb.PingRequest)) })
	default:
		err = apierr.InvalidArgument("batch command %d names no request", cmd.Id)
	}
	res.Status = apierr.RowStatus(err)
	return res
}
