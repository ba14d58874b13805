package tserver

import (
	"errors"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	rp "bighive/storage/replica"
	"bighive/storage/tablet/filter"
)

// tabletErr maps an error of a served tablet (its writes, reads,
// conditional mutations, read-modify-writes, samples and schema work) to
// the status a client acts on: the one place the tserver turns the
// storage layers' errors into statuses.
func (s *Server) tabletErr(r *rp.Replica, err error) error {
	switch {
	case err == nil:
		return nil
	// The errors of one kind of call, checked first as before.
	case errors.Is(err, rp.ErrInvalidCondMutation), errors.Is(err, rp.ErrInvalidRule):
		return apierr.Wrap(codes.InvalidArgument, err, "tablet %s", r.ID())
	case errors.Is(err, rp.ErrNotCounter):
		return apierr.Wrap(codes.FailedPrecondition, err, "tablet %s", r.ID())
	// Routing: nothing was applied; the client looks the row up again.
	case errors.Is(err, rp.ErrWrongTablet):
		return apierr.Tablet(pb.TabletError_WRONG_TABLET, r.ID(), r.Epoch(), "%v", err)
	case errors.Is(err, rp.ErrNotServing):
		return apierr.Tablet(pb.TabletError_NOT_SERVING, r.ID(), r.Epoch(), "%v", err)
	case errors.Is(err, rp.ErrSplitting):
		return apierr.Tablet(pb.TabletError_WRONG_TABLET, r.ID(), r.Epoch(), "tablet %s is splitting; refresh its location", r.ID())
	case errors.Is(err, rp.ErrUnknownOutcome), errors.Is(err, rp.ErrLog):
		// Not a routing error (a TabletError tells the client that nothing
		// was applied and that it may retry anywhere): the write may be in
		// the log, so only an idempotent one may be retried — a retried
		// server-timestamped write would be applied twice. Checked before
		// the tablet's closing, which may be why the outcome is unknown.
		return apierr.Wrap(codes.Unavailable, err, "tserver %s: the write may have been applied; its outcome is unknown", s.addr)
	case errors.Is(err, unix.ESTALE):
		// A read opened a file that another host replaced by rename on a
		// shared file system (docs/gluster.md): transient, not a dead
		// disk; a read is retried as for any Unavailable.
		return apierr.Wrap(codes.Unavailable, err, "tablet %s: a file it read was replaced meanwhile (a stale handle of the shared file system); retry", r.ID())
	case errors.Is(err, filter.ErrInvalid):
		return apierr.InvalidArgument("%v", err)
	case errors.Is(err, errUnknownFamily), errors.Is(err, errInvalidMutation):
		return apierr.Wrap(codes.InvalidArgument, err, "tablet %s", r.ID())
	case errors.Is(err, errTabletClosed):
		return apierr.Tablet(pb.TabletError_NOT_SERVING, r.ID(), r.Epoch(), "tablet %s was unloaded", r.ID())
	}
	return err
}
