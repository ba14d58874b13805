package client

import (
	"context"

	"bighive/internal/apierr"
	"bighive/internal/auth"
	pb "bighive/proto/bighivepb"
)

// Grant is one permission: Principal holds Role ("read", "write" or
// "admin") on Table ("" = every table).
type Grant struct {
	Principal string
	Role      string
	Table     string
}

func (g Grant) proto() (*pb.Grant, error) {
	r, err := auth.ParseRole(g.Role)
	if err != nil {
		return nil, statusError(apierr.InvalidArgument("%v", err), "client: grant")
	}
	return &pb.Grant{Principal: g.Principal, Role: r, Table: g.Table}, nil
}

// GrantRole gives g (admin only). Granting an existing grant is a no-op.
func (c *Client) GrantRole(ctx context.Context, g Grant) error {
	return c.changeGrant(ctx, "grant", g, func(ctx context.Context, m pb.MasterClient, pg *pb.Grant) error {
		_, err := m.Grant(ctx, &pb.GrantRequest{Grant: pg})
		return err
	})
}

// RevokeRole removes g (admin only); NotFound when it was not granted.
// Tservers stop honouring it within one heartbeat interval.
func (c *Client) RevokeRole(ctx context.Context, g Grant) error {
	return c.changeGrant(ctx, "revoke", g, func(ctx context.Context, m pb.MasterClient, pg *pb.Grant) error {
		_, err := m.Revoke(ctx, &pb.RevokeRequest{Grant: pg})
		return err
	})
}

func (c *Client) changeGrant(ctx context.Context, what string, g Grant, call func(context.Context, pb.MasterClient, *pb.Grant) error) error {
	pg, err := g.proto()
	if err != nil {
		return err
	}
	return c.callMaster(ctx, errorPrefix("%s %s", what, auth.GrantString(pg)), func(ctx context.Context, m pb.MasterClient) error {
		return call(ctx, m, pg)
	})
}

// Grants lists every grant (admin only) and the grants version.
func (c *Client) Grants(ctx context.Context) ([]Grant, uint64, error) {
	var resp *pb.ListGrantsResponse
	err := c.callMaster(ctx, errorPrefix("list grants"), func(ctx context.Context, m pb.MasterClient) (err error) {
		resp, err = m.ListGrants(ctx, &pb.ListGrantsRequest{})
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	var out []Grant
	for _, g := range resp.Grants.GetGrants() {
		out = append(out, Grant{Principal: g.Principal, Role: auth.RoleName(g.Role), Table: g.Table})
	}
	return out, resp.Grants.GetVersion(), nil
}
