package tserver

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	rp "bighive/storage/replica"
	"bighive/storage/tablet"
)

// TestReadModifyWriteErrorStatus: a write or read-modify-write that may
// have been logged must not come back as a routing error (TabletError),
// which the client retries as "nothing applied": a retried increment, or
// server-timestamped put, would count twice. Errors before the append
// keep their routing detail.
func TestReadModifyWriteErrorStatus(t *testing.T) {
	s := &Server{addr: "ts1"}
	r := rp.New(rp.Options{ID: "t1", Epoch: 3, Server: "ts1"})
	cases := []struct {
		name    string
		err     error
		code    codes.Code
		routing bool
	}{
		{"lease lost after the append", fmt.Errorf("%w (%w): tserver ts1, tablet t1", rp.ErrLeaseLost, rp.ErrUnknownOutcome), codes.Unavailable, false},
		{"engine closed after the append", fmt.Errorf("replica: tablet t1: apply: %w (%w)", tablet.ErrClosed, rp.ErrUnknownOutcome), codes.Unavailable, false},
		{"log append failed", fmt.Errorf("%w: tserver ts1, tablet t1: %w", rp.ErrLog, errors.New("EIO")), codes.Unavailable, false},
		{"not serving (before anything)", fmt.Errorf("%w: tablet t1", rp.ErrNotServing), codes.Unavailable, true},
		{"splitting (refused before the append)", fmt.Errorf("%w: tablet t1", rp.ErrSplitting), codes.FailedPrecondition, true},
		{"not a counter", fmt.Errorf("%w: 5 bytes", rp.ErrNotCounter), codes.FailedPrecondition, false},
		{"invalid rule", fmt.Errorf("%w: no rules", rp.ErrInvalidRule), codes.InvalidArgument, false},
		{"unknown family", fmt.Errorf("replica: tablet t1: %w", tablet.ErrUnknownFamily), codes.InvalidArgument, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.tabletErr(r, tc.err)
			_, routing := apierr.TabletReason(err)
			if code := apierr.CodeOf(err); code != tc.code || routing != tc.routing {
				t.Fatalf("read-modify-write: %v: code %v routing %v, want %v routing %v", err, code, routing, tc.code, tc.routing)
			}
			if errors.Is(tc.err, rp.ErrNotCounter) || errors.Is(tc.err, rp.ErrInvalidRule) {
				return // only read-modify-writes have these
			}
			err = s.tabletErr(r, tc.err)
			_, routing = apierr.TabletReason(err)
			if code := apierr.CodeOf(err); code != tc.code || routing != tc.routing {
				t.Fatalf("write: %v: code %v routing %v, want %v routing %v", err, code, routing, tc.code, tc.routing)
			}
		})
	}
}
