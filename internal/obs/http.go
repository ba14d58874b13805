package obs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns an empty registry holding the Go runtime and process
// collectors. Each server has its own.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// HTTPServer is a server's HTTP port: /metrics (the registry, in the
// Prometheus text format), /debug/pprof/ (net/http/pprof), and whatever
// Handle adds (a status page: one Handle call).
type HTTPServer struct {
	mux  *http.ServeMux
	srv  *http.Server
	lis  net.Listener
	log  *slog.Logger
	done chan struct{}
}

// ListenHTTP listens on addr and serves reg's metrics and pprof there.
func ListenHTTP(addr string, reg *prometheus.Registry, log *slog.Logger) (*HTTPServer, error) {
	return ListenHTTPTLS(addr, reg, log, nil)
}

// ListenHTTPTLS is ListenHTTP serving HTTPS under cfg (nil: plain HTTP).
func ListenHTTPTLS(addr string, reg *prometheus.Registry, log *slog.Logger, cfg *tls.Config) (*HTTPServer, error) {
	if log == nil {
		log = slog.Default()
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("obs: listen http %s: %w", addr, err)
	}
	scheme := "http"
	if cfg != nil {
		lis, scheme = tls.NewListener(lis, cfg), "https"
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	h := &HTTPServer{
		mux:  mux,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		lis:  lis,
		log:  log,
		done: make(chan struct{}),
	}
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("obs: http serve", "addr", h.Addr(), "err", err)
		}
	}()
	log.Info("http listening", "addr", h.Addr(), "metrics", scheme+"://"+h.Addr()+"/metrics")
	return h, nil
}

// Handle adds a handler to the HTTP port (safe while serving).
func (h *HTTPServer) Handle(pattern string, handler http.Handler) { h.mux.Handle(pattern, handler) }

// Addr is the address the HTTP port listens on.
func (h *HTTPServer) Addr() string { return h.lis.Addr().String() }

// Close stops the HTTP port, giving running requests a second.
func (h *HTTPServer) Close() error {
	if h == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := h.srv.Shutdown(ctx)
	if err != nil {
		err = h.srv.Close()
	}
	<-h.done
	if err != nil {
		return fmt.Errorf("obs: close http %s: %w", h.Addr(), err)
	}
	return nil
}

// DefaultHTTPAddr is the HTTP address of a server whose gRPC address is
// grpcAddr: the same host, the port plus 1000 (port 0 stays 0: any free
// port).
func DefaultHTTPAddr(grpcAddr string) (string, error) {
	host, port, err := net.SplitHostPort(grpcAddr)
	if err != nil {
		return "", fmt.Errorf("obs: gRPC address %q: %w", grpcAddr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("obs: gRPC address %q: port %q is not a number", grpcAddr, port)
	}
	if p == 0 {
		return net.JoinHostPort(host, "0"), nil
	}
	if p+1000 > 65535 {
		return "", fmt.Errorf("obs: gRPC port %d + 1000 is past 65535; give --http-listen", p)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+1000)), nil
}
