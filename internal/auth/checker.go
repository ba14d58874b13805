package auth

import (
	"context"
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
)

// Config configures a Checker.
type Config struct {
	// Tokens is the parsed tokens file.
	Tokens *Tokens
	// Grants, when set, is called at every check for the current grants
	// (the master reads its replicated metadata). Without it the Checker
	// holds the grants given to SetGrants (a tserver, from heartbeats).
	Grants func() *Grants
	// TabletTable returns the table of a tablet a tserver request names.
	// Its error is returned to the caller as is (a routing error for a
	// tablet not served here, which the client retries after a lookup).
	TabletTable func(ctx context.Context, tabletID string) (string, error)
	// Logger for denied calls and admin actions; nil is slog.Default().
	Logger *slog.Logger
}

// Checker authenticates and authorizes calls of one server.
type Checker struct {
	cfg    Config
	log    *slog.Logger
	grants atomic.Pointer[Grants]
}

// New returns a Checker; it starts with no grant (everything but
// Authenticated methods is denied until SetGrants).
func New(cfg Config) *Checker {
	c := &Checker{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.grants.Store(NewGrants(0, nil))
	return c
}

// SetGrants replaces the grants (a tserver, from a heartbeat reply).
func (c *Checker) SetGrants(g *Grants) { c.grants.Store(g) }

// Grants is the current set.
func (c *Checker) Grants() *Grants {
	if c.cfg.Grants != nil {
		return c.cfg.Grants()
	}
	return c.grants.Load()
}

// Check decides whether the principal in ctx (put there by the
// interceptors) may call method with role on table ("" = every table). A
// denial is PermissionDenied and is logged.
func (c *Checker) Check(ctx context.Context, method string, role Role, table string) error {
	p, ok := FromContext(ctx)
	if !ok {
		var err error
		if p, err = c.Authenticate(ctx); err != nil {
			c.logDenied(p, method, table, err)
			return err
		}
	}
	return c.allow(p, method, role, table)
}

func (c *Checker) allow(p Principal, method string, role Role, table string) error {
	if p.Server || role == RoleNone || c.Grants().Allows(p.Name, role, table) {
		return nil
	}
	err := status.Errorf(codes.PermissionDenied, "auth: principal %q lacks role %s on %s", p.Name, RoleName(role), TableString(table))
	c.logDenied(p, method, table, err)
	return err
}

func (c *Checker) logDenied(p Principal, method, table string, err error) {
	c.log.Warn("auth: call denied", "principal", p.Name, "method", method, "table", table,
		"outcome", apierr.CodeOf(err).String(), "err", err)
}

// authorize authenticates the caller of method and checks what it needs
// for req (nil for a stream before its first message). It returns the
// context carrying the principal.
func (c *Checker) authorize(ctx context.Context, method string, n Need, req any) (context.Context, Principal, string, error) {
	if n.Kind == Public || n.Kind == Internal {
		return ctx, Principal{}, "", nil
	}
	p, ok := FromContext(ctx)
	if !ok {
		var err error
		if p, err = c.Authenticate(ctx); err != nil {
			c.logDenied(p, method, "", err)
			return ctx, p, "", err
		}
		ctx = WithPrincipal(ctx, p)
	}
	if n.Kind != TableRole {
		return ctx, p, "", nil
	}
	table, err := c.tableOf(ctx, n, req)
	if err != nil {
		return ctx, p, "", err
	}
	return ctx, p, table, c.allow(p, method, n.Role, table)
}

// logAdmin logs a call that needed admin with its outcome.
func (c *Checker) logAdmin(p Principal, method, table string, err error) {
	c.log.Info("auth: admin action", "principal", p.Name, "method", method, "table", table,
		"outcome", apierr.CodeOf(err).String())
}

// AuthenticateInterceptor only authenticates (a master, before it forwards
// a call to the leader, which authorizes it); UnaryInterceptor later in
// the chain reuses the principal.
func (c *Checker) AuthenticateInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		n := Lookup(info.FullMethod)
		if n.Kind != Public && n.Kind != Internal {
			n = Need{Kind: Authenticated}
		}
		ctx, _, _, err := c.authorize(ctx, info.FullMethod, n, req)
		if err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// UnaryInterceptor checks every unary call before its handler runs.
func (c *Checker) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		n := Lookup(info.FullMethod)
		ctx, p, table, err := c.authorize(ctx, info.FullMethod, n, req)
		if err != nil {
			return nil, err
		}
		resp, err := h(ctx, req)
		if n.Kind == TableRole && n.Role == RoleAdmin {
			c.logAdmin(p, info.FullMethod, table, err)
		}
		return resp, err
	}
}

// StreamInterceptor checks every stream: it authenticates when the stream
// opens and, for a method needing a role on a table, checks the first
// message received before the handler sees it.
func (c *Checker) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		n := Lookup(info.FullMethod)
		if n.Kind == Public || n.Kind == Internal {
			return h(srv, ss)
		}
		ctx, p, _, err := c.authorize(ss.Context(), info.FullMethod, Need{Kind: Authenticated}, nil)
		if err != nil {
			return err
		}
		w := &checkedStream{ServerStream: ss, ctx: ctx, c: c, p: p, method: info.FullMethod, need: n}
		return h(srv, w)
	}
}

// checkedStream carries the principal and checks each message of a
// TableRole stream.
type checkedStream struct {
	grpc.ServerStream
	ctx    context.Context
	c      *Checker
	p      Principal
	method string
	need   Need
}

func (s *checkedStream) Context() context.Context { return s.ctx }

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.need.Kind != TableRole {
		return nil
	}
	table, err := s.c.tableOf(s.ctx, s.need, m)
	if err != nil {
		return err
	}
	return s.c.allow(s.p, s.method, s.need.Role, table)
}
