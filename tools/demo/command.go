package demo

import (
	"context"

	"bighive/tools/cli"
)

// Command is `bighive demo`: Run on a fresh temporary local cluster of
// real processes.
var Command = cli.Command{
	Name:    "demo",
	Args:    "[--rows N] [--dir DIR] [--keep]",
	Summary: "a scripted tour on a temporary local cluster: load, read, checkpoint, restart, verify, the Cloud Bigtable API, failover, splits",
	Example: "demo\ndemo --rows 10000 --keep",
	Run:     runDemo,
}

func runDemo(ctx context.Context, env *cli.Env, args []string) error {
	fs := env.FlagSet()
	rows := fs.Int("rows", 100_000, "rows to load")
	dir := fs.String("dir", "", "directory for the cluster (default: a temporary one)")
	keep := fs.Bool("keep", false, "keep the cluster's directory (data and process logs) afterwards")
	if _, err := env.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	return Run(ctx, Options{Rows: *rows, Dir: *dir, Keep: *keep || *dir != "", Out: env.Stdout})
}
