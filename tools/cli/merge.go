package cli

import (
	"context"
	"time"
)

var mergeCommand = Command{
	Name: "merge", Args: "TABLE ROW",
	Summary: "merge the tablet holding ROW with the next tablet of the table",
	Example: "merge t user#5\nmerge t \"\"",
	Run:     runMerge,
}

func runMerge(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 2, 2, nil)
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	id, err := c.MergeTablets(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	took := time.Since(start).Round(time.Millisecond)
	return env.result(map[string]any{"table": pos[0], "row": pos[1], "merged_tablet": id, "took_ms": took.Milliseconds()},
		"merged the tablet of table %s holding row %s with its successor into tablet %s in %s", pos[0], show(pos[1]), id, took)
}
