package tserver

import (
	"context"

	"bighive/internal/apierr"
	"bighive/internal/auth"
	pb "bighive/proto/bighivepb"
)

// Authorization on a tserver: with Options.AuthTokens set, every data call
// is checked here against the grants the master sent with the last
// heartbeat reply that changed them (no master round trip on the data
// path). Until the first such reply a tserver holds no grant.

// newChecker is the tserver's checker, nil without Options.AuthTokens.
func (s *Server) newChecker(tokens *auth.Tokens) *auth.Checker {
	if tokens == nil {
		return nil
	}
	return auth.New(auth.Config{Tokens: tokens, TabletTable: s.tableOfTablet, Logger: s.log})
}

// tableOfTablet is the table of a tablet served here; a tablet not served
// here gets the routing error its call would get, so the client looks it
// up again (tablet ids are never reused, so a tablet's table never
// changes).
func (s *Server) tableOfTablet(_ context.Context, tabletID string) (string, error) {
	if r := s.tablets.get(tabletID); r != nil {
		return r.Table(), nil
	}
	return "", apierr.Tablet(pb.TabletError_NOT_SERVING, tabletID, 0, "tablet %s is not served by %s", tabletID, s.addr)
}

// checkCommand checks one command of the batch stream as the unary call of
// the same name is checked; nil without authorization.
func (s *Server) checkCommand(ctx context.Context, method string, role auth.Role, tabletID string) error {
	if s.auth == nil {
		return nil
	}
	table, err := s.tableOfTablet(ctx, tabletID)
	if err != nil {
		return err
	}
	return s.auth.Check(ctx, method, role, table)
}

// grantsVersion is what the heartbeat reports holding. Without
// authorization the tserver keeps only the version, so the master does not
// send the list again with every reply.
func (s *Server) grantsVersion() uint64 {
	if s.auth == nil {
		return s.grantsSeen.Load()
	}
	return s.auth.Grants().Version()
}

// learnGrants installs the grants of a heartbeat reply.
func (s *Server) learnGrants(gl *pb.GrantList) {
	if gl == nil {
		return
	}
	if s.auth == nil {
		s.grantsSeen.Store(gl.Version)
		return
	}
	s.auth.SetGrants(auth.NewGrants(gl.Version, gl.Grants))
	s.log.Info("grants updated", "version", gl.Version, "grants", len(gl.Grants))
}

// checkBatchCommand checks one command of the batch stream.
func (s *Server) checkBatchCommand(ctx context.Context, c *pb.BatchCommandsRequest_Command) error {
	switch {
	case c.GetMutateRow() != nil:
		return s.checkCommand(ctx, auth.BatchMutateRow, auth.RoleWrite, c.GetMutateRow().TabletId)
	case c.GetReadRow() != nil:
		return s.checkCommand(ctx, auth.BatchReadRow, auth.RoleRead, c.GetReadRow().TabletId)
	}
	// A Ping touches no table: the authenticated stream is enough.
	return nil
}
