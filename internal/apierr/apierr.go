package apierr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	pb "bighive/proto/bighivepb"
)

// Error is an error with a gRPC code, a message for a person, an optional
// status detail, and an optional cause.
type Error struct {
	Code   codes.Code
	Msg    string
	Detail proto.Message
	Err    error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// GRPCStatus lets status.FromError and status.Code see the code directly.
func (e *Error) GRPCStatus() *status.Status { return e.status(e.Error()) }

func (e *Error) status(msg string) *status.Status {
	st := status.New(e.Code, msg)
	if e.Detail != nil {
		if ds, err := st.WithDetails(protoadapt.MessageV1Of(e.Detail)); err == nil {
			return ds
		}
	}
	return st
}

func newf(c codes.Code, format string, args ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// InvalidArgument: the request is malformed; retrying it cannot succeed.
func InvalidArgument(format string, args ...any) error {
	return newf(codes.InvalidArgument, format, args...)
}

// NotFound: a named table, family or tablet does not exist.
func NotFound(format string, args ...any) error { return newf(codes.NotFound, format, args...) }

// AlreadyExists: a create found the thing already there.
func AlreadyExists(format string, args ...any) error {
	return newf(codes.AlreadyExists, format, args...)
}

// FailedPrecondition: the request is valid but the state forbids it now (a
// stale epoch, a split already running).
func FailedPrecondition(format string, args ...any) error {
	return newf(codes.FailedPrecondition, format, args...)
}

// Aborted is a conflict with a concurrent change (a compare-and-swap that
// found something else): nothing was applied.
func Aborted(format string, args ...any) error { return newf(codes.Aborted, format, args...) }

// ResourceExhausted: a memory or size limit refused the request.
func ResourceExhausted(format string, args ...any) error {
	return newf(codes.ResourceExhausted, format, args...)
}

// Unavailable: try again, possibly elsewhere.
func Unavailable(format string, args ...any) error { return newf(codes.Unavailable, format, args...) }

// Wrap gives err a code and a message prefix, keeping it as the cause.
func Wrap(c codes.Code, err error, format string, args ...any) error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...), Err: err}
}

// NotLeader is Unavailable naming the leader's address (empty if unknown).
func NotLeader(leader string) error {
	msg := "master: not the leader"
	if leader != "" {
		msg += "; the leader is " + leader
	} else {
		msg += " and no leader is known yet"
	}
	return &Error{Code: codes.Unavailable, Msg: msg, Detail: &pb.NotLeader{LeaderAddress: leader}}
}

// Tablet makes a tablet-routing error: NOT_SERVING and RECOVERING are
// Unavailable, WRONG_TABLET is FailedPrecondition; all carry a TabletError
// detail that tells a client to refresh the location and retry.
func Tablet(reason pb.TabletError_Reason, tabletID string, epoch int64, format string, args ...any) error {
	c := codes.Unavailable
	if reason == pb.TabletError_WRONG_TABLET {
		c = codes.FailedPrecondition
	}
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...),
		Detail: &pb.TabletError{Reason: reason, TabletId: tabletID, Epoch: epoch}}
}

// CodeOf is the gRPC code err maps to: its own code, the code of a wrapped
// *Error or gRPC status, Canceled/DeadlineExceeded for context errors,
// OK for nil, and Internal for anything else.
func CodeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.Canceled) {
		return codes.Canceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		return gs.GRPCStatus().Code()
	}
	return codes.Internal
}

// ToStatus converts err into the status a handler returns.
func ToStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e.status(err.Error())
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	return status.New(CodeOf(err), err.Error())
}

// TabletReason returns the TabletError detail of a gRPC error, if any.
func TabletReason(err error) (*pb.TabletError, bool) {
	var e *Error
	if errors.As(err, &e) {
		te, ok := e.Detail.(*pb.TabletError)
		return te, ok
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	for _, d := range st.Details() {
		if te, ok := d.(*pb.TabletError); ok {
			return te, true
		}
	}
	return nil, false
}

// LeaderHint returns the leader address of a NotLeader error, if any.
func LeaderHint(err error) (string, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return "", false
	}
	for _, d := range st.Details() {
		if nl, ok := d.(*pb.NotLeader); ok {
			return nl.GetLeaderAddress(), true
		}
	}
	return "", false
}

// UnaryServerInterceptor converts handler errors with ToStatus and logs
// Internal ones.
func UnaryServerInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if err != nil {
			return resp, convert(log, info.FullMethod, err)
		}
		return resp, nil
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func StreamServerInterceptor(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := h(srv, ss); err != nil {
			return convert(log, info.FullMethod, err)
		}
		return nil
	}
}

func convert(log *slog.Logger, method string, err error) error {
	st := ToStatus(err)
	if st.Code() == codes.Internal || st.Code() == codes.Unknown {
		if log == nil {
			log = slog.Default()
		}
		log.Error("internal error", "method", method, "err", err)
	}
	return st.Err()
}

// RowStatus is the per-row status of a batched write: OK for nil, else
// err's code and message, and its TabletError detail if it has one (so a
// client can tell a routing refusal, safe to retry anywhere, from a
// failure of the row itself).
func RowStatus(err error) *pb.RowStatus {
	if err == nil {
		return &pb.RowStatus{}
	}
	st := ToStatus(err)
	rs := &pb.RowStatus{Code: int32(st.Code()), Message: st.Message()}
	if te, ok := TabletReason(err); ok {
		rs.TabletError = te
	}
	return rs
}

// FromRowStatus is the error a per-row status stands for: nil for OK, a
// gRPC status error with its TabletError detail otherwise.
func FromRowStatus(rs *pb.RowStatus) error {
	c := codes.Code(rs.GetCode())
	if c == codes.OK {
		return nil
	}
	st := status.New(c, rs.GetMessage())
	if te := rs.GetTabletError(); te != nil {
		if d, err := st.WithDetails(te); err == nil {
			st = d
		}
	}
	return st.Err()
}
