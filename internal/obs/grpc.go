package obs

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// GRPCMetrics counts a gRPC server's calls by method and code and times
// them by method. Its interceptors go first in the chain, so they see the
// status the client gets.
type GRPCMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewGRPCMetrics registers bighive_grpc_server_requests_total{method,code}
// and bighive_grpc_server_request_duration_seconds{method} in reg.
func NewGRPCMetrics(reg prometheus.Registerer) *GRPCMetrics {
	g := &GRPCMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bighive_grpc_server_requests_total",
			Help: "gRPC calls finished, by full method name and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bighive_grpc_server_request_duration_seconds",
			Help:    "gRPC call latency (for a stream: until it ends), by full method name.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 14), // 50 µs … ~7 min
		}, []string{"method"}),
	}
	reg.MustRegister(g.requests, g.latency)
	return g
}

func (g *GRPCMetrics) observe(method string, began time.Time, err error) {
	g.requests.WithLabelValues(method, status.Code(err).String()).Inc()
	g.latency.WithLabelValues(method).Observe(time.Since(began).Seconds())
}

// CommandMetrics counts and times the commands of one method carried
// inside a stream (the tserver's batch stream runs MutateRow, ReadRow and
// Ping commands there) as if each were its own call: a long-lived stream
// is counted by the interceptor only when it ends. Its series are looked
// up once, not per command (a label lookup hashes the labels under a
// lock, which cost more than the Ping it counted).
type CommandMetrics struct {
	method  string
	g       *GRPCMetrics
	latency prometheus.Observer
	byCode  [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Counter]
}

// Command returns the metrics of the commands named method.
func (g *GRPCMetrics) Command(method string) *CommandMetrics {
	return &CommandMetrics{method: method, g: g, latency: g.latency.WithLabelValues(method)}
}

// Observe counts one command that began at began and ended with code.
func (m *CommandMetrics) Observe(began time.Time, code codes.Code) {
	m.latency.Observe(time.Since(began).Seconds())
	if int(code) >= len(m.byCode) {
		m.g.requests.WithLabelValues(m.method, code.String()).Inc()
		return
	}
	c := m.byCode[code].Load()
	if c == nil {
		// The series is made on the first command with this code, so
		// /metrics shows only codes that happened.
		counter := m.g.requests.WithLabelValues(m.method, code.String())
		c = &counter
		m.byCode[code].Store(c)
	}
	(*c).Inc()
}

// UnaryInterceptor counts and times unary calls.
func (g *GRPCMetrics) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		began := time.Now()
		resp, err := h(ctx, req)
		g.observe(info.FullMethod, began, err)
		return resp, err
	}
}

// StreamInterceptor counts and times streaming calls.
func (g *GRPCMetrics) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		began := time.Now()
		err := h(srv, ss)
		g.observe(info.FullMethod, began, err)
		return err
	}
}

// Health is a server's grpc.health.v1 service: one status for the whole
// server ("") and the same for each named service.
type Health struct {
	srv      *health.Server
	services []string
}

// RegisterHealthAndReflection adds the standard health service (starting
// NOT_SERVING) and server reflection to s. services are the fully
// qualified names a health check may ask for besides "".
func RegisterHealthAndReflection(s *grpc.Server, services ...string) *Health {
	h := &Health{srv: health.NewServer(), services: services}
	healthpb.RegisterHealthServer(s, h.srv)
	reflection.Register(s)
	h.Set(false)
	return h
}

// Set makes every service SERVING or NOT_SERVING.
func (h *Health) Set(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	h.srv.SetServingStatus("", st)
	for _, name := range h.services {
		h.srv.SetServingStatus(name, st)
	}
}

// Shutdown makes every service NOT_SERVING for good (a server stopping).
func (h *Health) Shutdown() { h.srv.Shutdown() }
