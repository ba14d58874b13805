package tserver

import (
	"fmt"
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	rp "bighive/storage/replica"
	"bighive/storage/tablet"
	"bighive/storage/tablet/filter"
)

// TestCheckAndMutateErrorStatus: a conditional mutation that may have
// been logged is Unavailable without a routing detail (the client must
// not retry it as unapplied); bad input is InvalidArgument; a refusal
// before the append keeps its routing detail.
func TestCheckAndMutateErrorStatus(t *testing.T) {
	s := &Server{addr: "ts1"}
	r := rp.New(rp.Options{ID: "t1", Epoch: 3, Server: "ts1"})
	cases := []struct {
		name    string
		err     error
		code    codes.Code
		routing bool
	}{
		{"lease lost after the append", fmt.Errorf("%w (%w): tserver ts1, tablet t1", rp.ErrLeaseLost, rp.ErrUnknownOutcome), codes.Unavailable, false},
		{"not serving", fmt.Errorf("%w: tablet t1", rp.ErrNotServing), codes.Unavailable, true},
		{"neither list", fmt.Errorf("%w: row r", rp.ErrInvalidCondMutation), codes.InvalidArgument, false},
		{"unknown family", fmt.Errorf("replica: tablet t1: %w \"zz\"", tablet.ErrUnknownFamily), codes.InvalidArgument, false},
		{"predicate fails to evaluate", fmt.Errorf("tablet: %w", filter.ErrInvalid), codes.InvalidArgument, false},
		{"stale handle of a shared file system", fmt.Errorf("tsfile: read page: %w", &fs.PathError{Op: "open", Path: "/root/blocks/c.data", Err: unix.ESTALE}), codes.Unavailable, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.tabletErr(r, tc.err)
			_, routing := apierr.TabletReason(err)
			if code := apierr.CodeOf(err); code != tc.code || routing != tc.routing {
				t.Fatalf("%v: code %v routing %v, want %v routing %v", err, code, routing, tc.code, tc.routing)
			}
		})
	}
}
