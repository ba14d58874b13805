package client_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
)

// contractPing: Ping reaches the tserver of each tablet and answers; a
// bad row key is refused before anything is sent.
func contractPing(t *testing.T, e env, c *client.Client) {
	ctx := ctxT(t)
	tbl := createTable(t, e, c, "ping", "m")
	for _, row := range []string{"a", "m", "z"} {
		if err := tbl.Ping(ctx, row); err != nil {
			t.Fatalf("ping row %q: %v", row, err)
		}
	}
	if err := tbl.Ping(ctx, ""); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("ping of an empty row key: %v, want InvalidArgument", err)
	}
}
