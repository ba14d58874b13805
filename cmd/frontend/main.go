// Command frontend serves the Cloud Bigtable API (the data and table admin
// services) over a Bighive cluster.
//
//	frontend --masters 10.0.0.1:7100,10.0.0.2:7100,10.0.0.3:7100 --listen :8086
//
// It is stateless: it routes each row through the Bighive client's
// location cache, so any number may run, each on its own host or several
// behind a TCP load balancer. It stops cleanly on SIGTERM or SIGINT: it
// stops accepting calls and waits (up to --stop-timeout) for the running
// ones.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"bighive/client"
	"bighive/frontend"
	"bighive/internal/auth"
	"bighive/internal/obs"
	"bighive/internal/tlsconf"
)

func main() {
	var (
		listen   = flag.String("listen", ":8086", "`host:port` of the Cloud Bigtable API")
		masters  = flag.String("masters", "127.0.0.1:7100", "comma-separated master gRPC addresses")
		stopWait = flag.Duration("stop-timeout", 10*time.Second, "how long a stop waits for running calls")
		obsFlags = obs.AddFlags(flag.CommandLine, "frontend")
		tlsFiles tlsconf.Files
		tokens   = auth.TokensFlag(flag.CommandLine)
		wholeRow = flag.Int("whole-row-bytes", frontend.DefaultWholeRowBytes,
			"ReadRows sends a row of at most this many bytes whole in one response and cuts a larger one across responses; "+
				"raise it to the largest row for Go clients with a raised receive limit")
	)
	tlsconf.AddFlags(flag.CommandLine, &tlsFiles)
	flag.Parse()
	obsFlags.HandleVersion(os.Stdout)
	log := obsFlags.Logger(os.Stderr)
	slog.SetDefault(log)
	var ms []string
	for _, m := range strings.Split(*masters, ",") {
		if m = strings.TrimSpace(m); m != "" {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		fmt.Fprintln(os.Stderr, "frontend: --masters is empty")
		os.Exit(2)
	}
	tlsSrc, err := tlsconf.OpenServer(tlsFiles, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "frontend: %v\n", err)
		os.Exit(2)
	}
	authTokens, err := auth.LoadOptional(*tokens)
	if err != nil {
		fmt.Fprintf(os.Stderr, "frontend: --auth-tokens: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	copts := []client.Option{client.WithLogger(log)}
	if tlsSrc != nil {
		copts = append(copts, client.WithTransportCredentials(tlsconf.Credentials(tlsSrc)))
	}
	if authTokens != nil {
		// Each call goes on with its caller's token (frontend.ForwardCredentials).
		copts = append(copts, frontend.ForwardCredentials()...)
	}
	c, err := client.Dial(ctx, ms, copts...)
	if err != nil {
		log.Error("frontend: dial the masters", "masters", ms, "err", err)
		os.Exit(1)
	}
	defer c.Close()
	reg := obs.NewRegistry()
	l, err := frontend.ListenWith(*listen, c, log, frontend.ListenOptions{Metrics: reg, TLS: tlsSrc, AuthTokens: authTokens, WholeRowBytes: *wholeRow})
	if err != nil {
		log.Error("frontend: start", "err", err)
		os.Exit(1)
	}
	if addr := obsFlags.HTTPListen(*listen); addr != "" {
		h, err := obs.ListenHTTPTLS(addr, reg, log, tlsconf.HTTPConfig(tlsSrc))
		if err != nil {
			log.Error("frontend: start", "err", err)
			os.Exit(1)
		}
		defer h.Close()
	}
	log.Info("frontend: started", "addr", l.Addr(), "masters", ms)
	<-ctx.Done()
	log.Info("frontend: stopping")
	sctx, cancel := context.WithTimeout(context.Background(), *stopWait)
	defer cancel()
	if err := l.Stop(sctx); err != nil {
		log.Error("frontend: stop", "err", err)
		os.Exit(1)
	}
	log.Info("frontend: stopped")
}
