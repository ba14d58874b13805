package main

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

	"bighive/internal/cli"
	"bighive/master"
	"bighive/tserver"
)

// devCommand runs a local cluster in one process: one master and three
// tservers on loopback with real gRPC and real storage under --dir.
var devCommand = cli.Command{
	Name:    "dev",
	Args:    "[--dir DIR] [--port N]",
	Summary: "run a local cluster (1 master, 3 tservers) in this process until Ctrl-C; data persists in --dir",
	Example: "dev --dir ./bighive-data",
	Run:     runDev,
}

func runDev(ctx context.Context, env *cli.Env, args []string) error {
	fs := env.FlagSet()
	dir := fs.String("dir", "./bighive-data", "data directory (reused when started again)")
	port := fs.Int("port", 7100, "master gRPC port; raft uses port+1, tservers port+101..port+103")
	verbose := fs.Bool("v", false, "log at info level (default: warnings only)")
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
	lis, err := net.Listen("tcp", addr(*port))
	if err != nil {
		return fmt.Errorf("dev: master port: %w (is another dev cluster running?)", err)
	}
	m, err := master.Start(master.Config{ID: "dev", Dir: filepath.Join(abs, "master"), RaftAddr: addr(*port + 1), Logger: log}, lis)
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
			Root: filepath.Join(abs, "root"), Logger: log})
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	fmt.Fprintf(env.Stdout, "bighive dev cluster, data in %s\n  master   %s\n", abs, m.Addr())
	for _, s := range servers {
		fmt.Fprintf(env.Stdout, "  tserver  %s\n", s.Addr())
	}
	fmt.Fprintf(env.Stdout, "try: BIGHIVE_MASTERS=%s bighive tables    (Ctrl-C stops the cluster)\n", m.Addr())
	<-ctx.Done()
	fmt.Fprintln(env.Stdout, "stopping")
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.Close())
	}
	servers = nil
	errs = append(errs, m.Close())
	return errors.Join(errs...)
}
