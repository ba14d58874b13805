package apierr_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

func TestCodeOf(t *testing.T) {
	tests := []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{apierr.InvalidArgument("x"), codes.InvalidArgument},
		{fmt.Errorf("ctx: %w", apierr.NotFound("table %q", "t")), codes.NotFound},
		{apierr.AlreadyExists("x"), codes.AlreadyExists},
		{apierr.FailedPrecondition("x"), codes.FailedPrecondition},
		{apierr.ResourceExhausted("x"), codes.ResourceExhausted},
		{apierr.Unavailable("x"), codes.Unavailable},
		{apierr.NotLeader("m2:1"), codes.Unavailable},
		{apierr.Tablet(pb.TabletError_WRONG_TABLET, "t1", 3, "moved"), codes.FailedPrecondition},
		{apierr.Tablet(pb.TabletError_NOT_SERVING, "t1", 3, "gone"), codes.Unavailable},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{status.Error(codes.Aborted, "x"), codes.Aborted},
		{errors.New("disk on fire"), codes.Internal},
	}
	for _, tc := range tests {
		if got := apierr.CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	cause := errors.New("cause")
	if w := apierr.Wrap(codes.Unavailable, cause, "wal"); !errors.Is(w, cause) {
		t.Errorf("Wrap lost its cause")
	}
}

type fakeTServer struct {
	pb.UnimplementedTServerServer
}

func (fakeTServer) MutateRow(ctx context.Context, req *pb.MutateRowRequest) (*pb.MutateRowResponse, error) {
	if err := limits.ValidateRowMutation(req.Row); err != nil {
		return nil, err
	}
	if req.TabletId != "t1" {
		return nil, fmt.Errorf("routing: %w", apierr.Tablet(pb.TabletError_WRONG_TABLET, req.TabletId, req.Epoch, "tablet %s split", req.TabletId))
	}
	return nil, errors.New("unexpected bug")
}

// TestOverGRPC sends real requests over loopback: statuses, details and the
// message size limits survive the wire.
func TestOverGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(limits.GRPCServerOptions(),
		grpc.UnaryInterceptor(apierr.UnaryServerInterceptor(nil)))
	srv := grpc.NewServer(opts...)
	pb.RegisterTServerServer(srv, fakeTServer{})
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), limits.GRPCCallOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewTServerClient(conn)
	ctx := context.Background()
	row := func(key string, value []byte) *pb.RowMutation {
		return &pb.RowMutation{RowKey: []byte(key), Mutations: []*pb.Mutation{{Mutation: &pb.Mutation_SetCell_{
			SetCell: &pb.Mutation_SetCell{Family: "f", Value: value}}}}}
	}

	_, err = c.MutateRow(ctx, &pb.MutateRowRequest{TabletId: "t1", Row: row("", nil)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "row key is empty") {
		t.Fatalf("empty row key: %v", err)
	}
	_, err = c.MutateRow(ctx, &pb.MutateRowRequest{TabletId: "t9", Epoch: 4, Row: row("r", nil)})
	te, ok := apierr.TabletReason(err)
	if status.Code(err) != codes.FailedPrecondition || !ok || te.Reason != pb.TabletError_WRONG_TABLET || te.TabletId != "t9" || te.Epoch != 4 {
		t.Fatalf("wrong tablet: %v (detail %v)", err, te)
	}
	_, err = c.MutateRow(ctx, &pb.MutateRowRequest{TabletId: "t1", Row: row("r", nil)})
	if status.Code(err) != codes.Internal {
		t.Fatalf("plain error: %v, want Internal", err)
	}
	// One byte over the request limit is refused before it is sent. The
	// message is one 64 KiB buffer over and over (sameBuffers), so the
	// test holds no copy of 257 MiB.
	piece := make([]byte, 64<<10)
	var msg mem.BufferSlice
	for left := limits.MaxRequestBytes + 1; left > 0; left -= len(piece) {
		msg = append(msg, mem.SliceBuffer(piece[:min(len(piece), left)]))
	}
	err = conn.Invoke(ctx, pb.TServer_MutateRow_FullMethodName, msg, new(pb.MutateRowResponse), grpc.ForceCodecV2(sameBuffers{}))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "trying to send message larger than max") {
		t.Fatalf("oversized request: %v, want ResourceExhausted refused before it is sent", err)
	}
}

// TestRowStatusRoundTrip: a per-row status keeps the code, the message and
// the TabletError detail, so a client still sees a routing refusal.
func TestRowStatusRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		reason pb.TabletError_Reason // REASON_UNSPECIFIED: no detail
	}{
		{"ok", nil, pb.TabletError_REASON_UNSPECIFIED},
		{"plain", apierr.InvalidArgument("unknown family %q", "x"), pb.TabletError_REASON_UNSPECIFIED},
		{"splitting", apierr.Tablet(pb.TabletError_WRONG_TABLET, "t1", 3, "tablet t1 is splitting"), pb.TabletError_WRONG_TABLET},
		{"wrapped", fmt.Errorf("replica: %w", apierr.Tablet(pb.TabletError_NOT_SERVING, "t2", 1, "moved")), pb.TabletError_NOT_SERVING},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := apierr.FromRowStatus(apierr.RowStatus(tc.err))
			if apierr.CodeOf(got) != apierr.CodeOf(tc.err) {
				t.Fatalf("code %v, want %v", apierr.CodeOf(got), apierr.CodeOf(tc.err))
			}
			if tc.err == nil {
				return
			}
			if !strings.Contains(status.Convert(got).Message(), status.Convert(apierr.ToStatus(tc.err).Err()).Message()) {
				t.Errorf("message %q lost %q", status.Convert(got).Message(), tc.err)
			}
			te, ok := apierr.TabletReason(got)
			if tc.reason == pb.TabletError_REASON_UNSPECIFIED {
				if ok {
					t.Errorf("unexpected detail %v", te)
				}
				return
			}
			if !ok || te.Reason != tc.reason {
				t.Errorf("detail %v %v, want reason %v", te, ok, tc.reason)
			}
		})
	}
}

// sameBuffers sends a mem.BufferSlice as it is.
type sameBuffers struct{}

func (sameBuffers) Marshal(v any) (mem.BufferSlice, error)      { return v.(mem.BufferSlice), nil }
func (sameBuffers) Unmarshal(data mem.BufferSlice, v any) error { return nil }
func (sameBuffers) Name() string                                { return "proto" }
