package frontend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"bighive/client"
	"bighive/internal/apierr"
	"bighive/internal/auth"
	"bighive/internal/obs"
	"bighive/internal/tlsconf"
)

// Listener is a frontend serving the Bigtable API on a TCP address.
type Listener struct {
	g      *grpc.Server
	lis    net.Listener
	log    *slog.Logger
	health *obs.Health
	done   chan error
}

// ListenOptions are the optional parts of ListenWith.
type ListenOptions struct {
	// Metrics, if set, receives the gRPC request metrics.
	Metrics prometheus.Registerer
	// TLS, if set, serves the API over TLS 1.3 only, with the
	// certificate re-read when its files change. Nil: plaintext.
	TLS *tlsconf.Source
	// AuthTokens, when set, refuses calls without a known bearer token;
	// the client given must then forward credentials (ForwardCredentials).
	AuthTokens *auth.Tokens
	// WholeRowBytes, if positive, bounds the rows ReadRows sends whole in
	// one response (Server.SetWholeRowBytes); 0: DefaultWholeRowBytes.
	WholeRowBytes int
}

// Listen serves the Bigtable API on addr (host:port; port 0 picks one)
// through c, which it does not close, until Stop.
func Listen(addr string, c *client.Client, log *slog.Logger) (*Listener, error) {
	return ListenWith(addr, c, log, ListenOptions{})
}

// ListenWith is Listen with options. Besides the Bigtable API it serves
// the gRPC health service (SERVING from start until Stop) and server
// reflection.
func ListenWith(addr string, c *client.Client, log *slog.Logger, o ListenOptions) (*Listener, error) {
	if log == nil {
		log = slog.Default()
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("frontend: listen on %s: %w", addr, err)
	}
	unary := []grpc.UnaryServerInterceptor{apierr.UnaryServerInterceptor(log)}
	stream := []grpc.StreamServerInterceptor{apierr.StreamServerInterceptor(log)}
	if o.AuthTokens != nil {
		u, st := authInterceptors(o.AuthTokens)
		unary, stream = append(unary, u), append(stream, st)
	}
	if o.Metrics != nil {
		gm := obs.NewGRPCMetrics(o.Metrics)
		unary = append([]grpc.UnaryServerInterceptor{gm.UnaryInterceptor()}, unary...)
		stream = append([]grpc.StreamServerInterceptor{gm.StreamInterceptor()}, stream...)
	}
	g := grpc.NewServer(append(append(ServerOptions(), tlsconf.ServerOptions(o.TLS)...),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	)...)
	New(c, log).SetWholeRowBytes(o.WholeRowBytes).Register(g)
	h := obs.RegisterHealthAndReflection(g, "google.bigtable.v2.Bigtable", "google.bigtable.admin.v2.BigtableTableAdmin", "google.longrunning.Operations")
	h.Set(true)
	l := &Listener{g: g, lis: lis, log: log, health: h, done: make(chan error, 1)}
	go func() { l.done <- g.Serve(lis) }()
	log.Info("frontend: serving the Bigtable API", "addr", l.Addr())
	return l, nil
}

// Addr is the address the frontend listens on.
func (l *Listener) Addr() string { return l.lis.Addr().String() }

// Stop stops accepting calls and waits for the running ones to finish, or
// cancels them when ctx ends first.
func (l *Listener) Stop(ctx context.Context) error {
	l.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		l.g.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		l.g.Stop()
		<-stopped
	}
	if err := <-l.done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("frontend: serve: %w", err)
	}
	return nil
}
