// Package dev is `bighive dev`: a local cluster in one process, for
// trying Bighive and for developing against it. It is apart from package
// cli so that the CLI itself links only the client library.
package dev

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"bighive/client"
	"bighive/frontend"
	"bighive/master"
	"bighive/tools/cli"
	"bighive/tserver"
)

// Command runs a local cluster in one process: one master and three
// tservers on loopback with real gRPC and real storage under --dir, and the
// Cloud Bigtable API on --bigtable (the emulator's port by default).
var Command = cli.Command{
	Name:    "dev",
	Args:    "[--dir DIR] [--port N] [--bigtable ADDR] [--http=false]",
	Summary: "run a local cluster (1 master, 3 tservers, the Cloud Bigtable API on 127.0.0.1:8086) in this process until Ctrl-C; data persists in --dir",
	Example: "dev --dir ./bighive-data\ndev --bigtable 127.0.0.1:9000\ndev --bigtable \"\"",
	Run:     runDev,
}

func runDev(ctx context.Context, env *cli.Env, args []string) error {
	fs := env.FlagSet()
	dir := fs.String("dir", "./bighive-data", "data directory (reused when started again)")
	port := fs.Int("port", 7100, "master gRPC port; raft uses port+1, tservers port+101..port+103")
	btAddr := fs.String("bigtable", frontend.DefaultAddr, "address of the Cloud Bigtable API (for BIGTABLE_EMULATOR_HOST); empty: do not serve it")
	verbose := fs.Bool("v", false, "log at info level (default: warnings only)")
	withHTTP := fs.Bool("http", true, "serve /metrics and /debug/pprof/ on each server's gRPC port + 1000")
	if _, err := env.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	addr := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	httpAddr := func(p int) string {
		if !*withHTTP {
			return ""
		}
		return addr(p + 1000)
	}
	lis, err := net.Listen("tcp", addr(*port))
	if err != nil {
		return fmt.Errorf("dev: master port: %w (is another dev cluster running?)", err)
	}
	m, err := master.Start(master.Config{ID: "dev", Dir: filepath.Join(abs, "master"), RaftAddr: addr(*port + 1), Logger: log,
		HTTPListen: httpAddr(*port)}, lis)
	if err != nil {
		lis.Close()
		return err
	}
	defer m.Close()
	var servers []*tserver.Server
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	for i := 1; i <= 3; i++ {
		s, err := tserver.Start(ctx, tserver.Options{Listen: addr(*port + 100 + i), Masters: []string{m.Addr()},
			Root: filepath.Join(abs, "root"), Logger: log, HTTPListen: httpAddr(*port + 100 + i)})
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	var api *frontend.Listener
	var apiClient *client.Client
	if *btAddr != "" {
		// The API's client reaches the tservers of this process without
		// a connection to them.
		copts := []client.Option{client.WithLogger(log)}
		for _, s := range servers {
			copts = append(copts, client.WithLocalTServer(s))
		}
		apiClient, err = client.Dial(ctx, []string{m.Addr()}, copts...)
		if err != nil {
			return err
		}
		defer apiClient.Close()
		api, err = frontend.Listen(*btAddr, apiClient, log)
		if err != nil {
			return fmt.Errorf("dev: Bigtable API: %w (is another dev cluster or emulator running? --bigtable changes the address)", err)
		}
	}
	withMetrics := func(grpcAddr, httpAddr string) string {
		if httpAddr == "" {
			return grpcAddr
		}
		return grpcAddr + "    (metrics http://" + httpAddr + "/metrics)"
	}
	fmt.Fprintf(env.Stdout, "bighive dev cluster, data in %s\n  master   %s\n", abs, withMetrics(m.Addr(), m.HTTPAddr()))
	for _, s := range servers {
		fmt.Fprintf(env.Stdout, "  tserver  %s\n", withMetrics(s.Addr(), s.HTTPAddr()))
	}
	if api != nil {
		fmt.Fprintf(env.Stdout, "  bigtable %s    (Cloud Bigtable API: BIGTABLE_EMULATOR_HOST=%s)\n", api.Addr(), api.Addr())
	}
	fmt.Fprintf(env.Stdout, "try: BIGHIVE_MASTERS=%s bighive tables    (Ctrl-C stops the cluster)\n", m.Addr())
	<-ctx.Done()
	fmt.Fprintln(env.Stdout, "stopping")
	var errs []error
	if api != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, api.Stop(sctx))
		cancel()
	}
	for _, s := range servers {
		errs = append(errs, s.Close())
	}
	servers = nil
	errs = append(errs, m.Close())
	return errors.Join(errs...)
}
