package tserver

import (
	"context"

	pb "bighive/proto/bighivepb"
)

// Ping does nothing: it is the cost of one unary call on its own (the
// gRPC transport, the server's interceptors and a proto round trip),
// with no tablet, lock, log or lease behind it. The bench's ping phase
// measures it as the floor of every other call.
func (s *Server) Ping(context.Context, *pb.PingRequest) (*pb.PingResponse, error) {
	return &pb.PingResponse{}, nil
}
