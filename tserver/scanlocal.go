package tserver

import (
	"context"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

// ScanLocal is ScanRows for a client in this process (the client library
// given this tserver with client.WithLocalTServer: the Cloud Bigtable API
// a tserver serves itself, `bighive dev`), without gRPC. The scan runs in
// a goroutine and hands each message to recv through a channel (a flat
// scan's message as the scan built it, with a chunk buffer of its own;
// any other a copy); recv returns
// io.EOF after the last message, or the scan's error as a gRPC status, as
// the unary stream's Recv would. The end of ctx stops the scan. Through
// gRPC to itself, the API's scans paid a marshal, two system calls and an
// unmarshal per message, and a copy of every byte more.
func (s *Server) ScanLocal(ctx context.Context, req *pb.ScanRowsRequest) (recv func() (*pb.ScanRowsResponse, error)) {
	st := &localScanStream{ctx: ctx, msgs: make(chan *pb.ScanRowsResponse, 1)}
	go func() {
		err := s.ScanRows(req, st)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				err = apierr.Wrap(codes.Canceled, cerr, "tserver: local scan stopped")
			}
			st.err = apierr.ToStatus(err).Err()
		}
		close(st.msgs) // publishes st.err
	}()
	return func() (*pb.ScanRowsResponse, error) {
		if m, ok := <-st.msgs; ok {
			return m, nil
		}
		if st.err != nil {
			return nil, st.err
		}
		return nil, io.EOF
	}
}

// localScanStream is the server side of a local scan: Send passes a copy
// of each message on, until the caller's context ends (a flat scan's
// messages, built for it, go on without a copy: sendOwned).
type localScanStream struct {
	ctx  context.Context
	msgs chan *pb.ScanRowsResponse
	err  error // set before msgs is closed
}

func (st *localScanStream) Send(m *pb.ScanRowsResponse) error {
	return st.sendOwned(proto.Clone(m).(*pb.ScanRowsResponse))
}

// sendOwned passes m on as it is: the caller gives it up, with every
// buffer it refers to (a flat scan's chunk, which is then not copied).
func (st *localScanStream) sendOwned(m *pb.ScanRowsResponse) error {
	select {
	case st.msgs <- m:
		return nil
	case <-st.ctx.Done():
		return st.ctx.Err()
	}
}

func (st *localScanStream) Context() context.Context     { return st.ctx }
func (st *localScanStream) SetHeader(metadata.MD) error  { return nil }
func (st *localScanStream) SendHeader(metadata.MD) error { return nil }
func (st *localScanStream) SetTrailer(metadata.MD)       {}
func (st *localScanStream) SendMsg(m any) error          { return st.Send(m.(*pb.ScanRowsResponse)) }
func (st *localScanStream) RecvMsg(any) error            { return io.EOF }
