// Command bighive is Bighive's command line client: tables, rows and admin
// calls against a running cluster (see `bighive help`), plus `dev` (a local
// cluster in one process) and `demo` (a scripted tour).
package main

import (
	"os"

	"bighive/tools/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, devCommand, demoCommand, benchCommand))
}
