package frontend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"bighive/client"
	"bighive/internal/apierr"
)

// Listener is a frontend serving the Bigtable API on a TCP address.
type Listener struct {
	g    *grpc.Server
	lis  net.Listener
	log  *slog.Logger
	done chan error
}

// Listen serves the Bigtable API on addr (host:port; port 0 picks one)
// through c, which it does not close, until Stop.
func Listen(addr string, c *client.Client, log *slog.Logger) (*Listener, error) {
	if log == nil {
		log = slog.Default()
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("frontend: listen on %s: %w", addr, err)
	}
	g := grpc.NewServer(append(ServerOptions(),
		grpc.ChainUnaryInterceptor(apierr.UnaryServerInterceptor(log)),
		grpc.ChainStreamInterceptor(apierr.StreamServerInterceptor(log)),
	)...)
	New(c, log).Register(g)
	l := &Listener{g: g, lis: lis, log: log, done: make(chan error, 1)}
	go func() { l.done <- g.Serve(lis) }()
	log.Info("frontend: serving the Bigtable API", "addr", l.Addr())
	return l, nil
}

// Addr is the address the frontend listens on.
func (l *Listener) Addr() string { return l.lis.Addr().String() }

// Stop stops accepting calls and waits for the running ones to finish, or
// cancels them when ctx ends first.
func (l *Listener) Stop(ctx context.Context) error {
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
