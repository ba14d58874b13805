package main

import (
	"context"
	"errors"

	"bighive/internal/cli"
)

// devCommand runs a local cluster in one process: one master and three
// tservers on loopback with real storage under --dir. It needs the tserver
// package, so for now it only says it is not available.
var devCommand = cli.Command{
	Name:    "dev",
	Args:    "[--dir DIR]",
	Summary: "run a local cluster (1 master, 3 tservers) until Ctrl-C",
	Run:     runDev,
}

func runDev(ctx context.Context, env *cli.Env, args []string) error {
	return &cli.ExitError{Code: 2, Err: errors.New("not available yet: the tserver is not built into this binary")}
}
