package cli

import (
	"context"

	"bighive/client"
)

var setCompressionCommand = Command{
	Name: "setcompression", Args: "TABLE FAMILY none|snappy|zstd",
	Summary: "set a family's compression (files written from now on use it; older files keep theirs)",
	Example: "setcompression t cf zstd\nsetcompression t blobs none",
	Run:     runSetCompression,
}

// parseCompressionFlag parses a --compression value ("" is the default).
func parseCompressionFlag(s string) (client.Compression, error) {
	c, err := client.ParseCompression(s)
	if err != nil {
		return 0, Usagef("--compression %q: use none, snappy or zstd", s)
	}
	return c, nil
}

// compressionName is the codec a family's compression means ("snappy"
// for the default).
func compressionName(c client.Compression) string {
	if c == client.CompressionDefault {
		return client.CompressionSnappy.String()
	}
	return c.String()
}

func runSetCompression(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 3, 3, nil)
	if err != nil {
		return err
	}
	defer done()
	comp, err := client.ParseCompression(pos[2])
	if err != nil || pos[2] == "" || pos[2] == "default" {
		return Usagef("compression %q: use none, snappy or zstd", pos[2])
	}
	if err := c.SetCompression(ctx, pos[0], pos[1], comp); err != nil {
		return err
	}
	return env.result(map[string]any{"table": pos[0], "family": pos[1], "compression": comp.String()},
		"set the compression of %s:%s to %s", pos[0], pos[1], comp)
}
