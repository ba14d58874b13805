package cli

import (
	"context"
	"time"
)

var compactCommand = Command{
	Name: "compact", Args: "TABLE [--major]",
	Summary: "compact every tablet of a table; --major also drops deleted, overwritten and expired cells and the tombstones",
	Example: "compact t\ncompact t --major\n--timeout 0 compact t --major",
	Run:     runCompact,
}

func runCompact(ctx context.Context, env *Env, args []string) error {
	var major bool
	ctx, done, c, pos, err := env.session(ctx, args, 1, 1, func(fs flagSet) {
		fs.BoolVar(&major, "major", false, "merge all of each tablet's files and drop what reads no longer show")
	})
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	if err := c.Compact(ctx, pos[0], major); err != nil {
		return err
	}
	kind := "merging"
	if major {
		kind = "major"
	}
	took := time.Since(start).Round(time.Millisecond)
	return env.result(map[string]any{"table": pos[0], "major": major, "took_ms": took.Milliseconds()},
		"compacted table %s (%s) in %s", pos[0], kind, took)
}
