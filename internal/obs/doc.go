// Package obs is what every Bighive server shares for being observed from
// outside: the HTTP port (/metrics for Prometheus, /debug/pprof/, and any
// page a server adds with HTTPServer.Handle), a per-server Prometheus
// registry with the Go runtime and process collectors, the gRPC request
// metrics interceptors, the standard health service and server reflection,
// slog set-up (--log-format, --log-level) and the build version.
//
// The status pages of masters and tservers (master/status.go,
// tserver/status.go) share the layout here (page.go): html/template, so
// every string is escaped, a viewport tag and plain CSS with tables that
// scroll sideways, no JavaScript.
//
// Metric names follow bighive_<subsystem>_<name>_<unit>, and labels are
// kept to small fixed sets (method, code, priority, kind, state): figures
// per tablet or row are never labels.
//
// A server builds its own registry (NewRegistry) instead of using the
// global default, so several servers in one test process do not collide.
package obs
