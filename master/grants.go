package master

import (
	"context"
	"sync"

	"bighive/internal/auth"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// grantCache holds the grants of the local FSM at the version last read,
// so a check costs one read of the version unless grants changed.
type grantCache struct {
	mu  sync.Mutex
	cur *auth.Grants
}

// grants is the current set of the local replica of the metadata (calls
// are checked by the master handling them: the leader, but for
// GetMasterStatus).
func (m *Master) grants() *auth.Grants {
	var ver uint64
	_ = m.view(func(r *meta.Reader) error { ver = r.GrantsVersion(); return nil })
	m.grantCache.mu.Lock()
	defer m.grantCache.mu.Unlock()
	if c := m.grantCache.cur; c != nil && c.Version() == ver {
		return c
	}
	var gl *pb.GrantList
	if err := m.view(func(r *meta.Reader) (err error) { gl, err = r.Grants(); return err }); err != nil {
		m.log.Error("cannot read grants; denying what needs a grant", "err", err)
		return auth.NewGrants(0, nil)
	}
	m.grantCache.cur = auth.NewGrants(gl.Version, gl.Grants)
	return m.grantCache.cur
}

// Grant adds a grant (admin only, checked by the interceptor).
func (m *Master) Grant(ctx context.Context, req *pb.GrantRequest) (*pb.GrantResponse, error) {
	if err := m.changeGrant(ctx, "granted", req.Grant,
		&spb.MetaCommand{Cmd: &spb.MetaCommand_Grant{Grant: &spb.MetaGrant{Grant: req.Grant}}}); err != nil {
		return nil, err
	}
	return &pb.GrantResponse{}, nil
}

// Revoke removes a grant; tservers stop honouring it at their next
// heartbeat.
func (m *Master) Revoke(ctx context.Context, req *pb.RevokeRequest) (*pb.RevokeResponse, error) {
	if err := m.changeGrant(ctx, "revoked", req.Grant,
		&spb.MetaCommand{Cmd: &spb.MetaCommand_Revoke{Revoke: &spb.MetaRevoke{Grant: req.Grant}}}); err != nil {
		return nil, err
	}
	return &pb.RevokeResponse{}, nil
}

func (m *Master) changeGrant(ctx context.Context, what string, g *pb.Grant, cmd *spb.MetaCommand) error {
	if _, err := m.ready(); err != nil {
		return err
	}
	if err := meta.CheckGrant(g); err != nil {
		return err
	}
	if _, err := m.apply(ctx, cmd); err != nil {
		return err
	}
	by, _ := auth.FromContext(ctx)
	m.log.Info("grant "+what, "by", by.Name, "principal", g.Principal, "role", auth.RoleName(g.Role), "table", g.Table)
	m.events.add("grant", "%s %s by %s", auth.GrantString(g), what, by.Name)
	return nil
}

// ListGrants returns every grant (answered by the leader after a quorum
// check).
func (m *Master) ListGrants(ctx context.Context, _ *pb.ListGrantsRequest) (*pb.ListGrantsResponse, error) {
	if _, err := m.readyRead(); err != nil {
		return nil, err
	}
	var gl *pb.GrantList
	if err := m.view(func(r *meta.Reader) (err error) { gl, err = r.Grants(); return err }); err != nil {
		return nil, err
	}
	return &pb.ListGrantsResponse{Grants: gl}, nil
}

// bootstrapAdmin proposes --bootstrap-admin once per leader session; the
// FSM grants it only while no grant exists.
func (m *Master) bootstrapAdmin(ctx context.Context) {
	p := m.cfg.BootstrapAdmin
	if p == "" {
		return
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_BootstrapAdmin{BootstrapAdmin: &spb.MetaBootstrapAdmin{Principal: p}}})
	switch {
	case err != nil:
		m.log.Error("bootstrap admin failed", "principal", p, "err", err)
	case res.Applied > 0:
		m.log.Info("auth: admin action", "principal", p, "method", "bootstrap-admin", "table", "", "outcome", "OK")
	}
}

// grantsFor is the reply's grants for a heartbeat holding version have:
// nil when it is current.
func grantsFor(r *meta.Reader, have uint64) (*pb.GrantList, error) {
	if r.GrantsVersion() == have {
		return nil, nil
	}
	return r.Grants()
}
