// Command bighive is Bighive's command line client: tables, rows and admin
// calls against a running cluster (see `bighive help`), plus `dev` (a local
// cluster in one process), `demo` (a scripted tour) and `bench` (the
// benchmark). The commands live in tools/cli, tools/cli/dev, tools/demo and
// tools/bench; this is only their main.
package main

import (
	"os"

	"bighive/tools/bench"
	"bighive/tools/cli"
	"bighive/tools/cli/dev"
	"bighive/tools/demo"
)

// extra are the commands bighive adds to the CLI's own.
var extra = []cli.Command{dev.Command, demo.Command, bench.Command}

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, extra...))
}
