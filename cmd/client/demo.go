package main

import (
	"context"
	"errors"

	"bighive/internal/cli"
)

// demoCommand is the scripted tour on a fresh temporary local cluster. It
// needs the tserver package, so for now it only says it is not available.
var demoCommand = cli.Command{
	Name:    "demo",
	Summary: "a scripted tour on a temporary local cluster",
	Run:     runDemo,
}

func runDemo(ctx context.Context, env *cli.Env, args []string) error {
	return &cli.ExitError{Code: 2, Err: errors.New("not available yet: the tserver is not built into this binary")}
}
