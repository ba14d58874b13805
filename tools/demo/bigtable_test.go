package demo

import (
	"context"
	"strings"
	"testing"
	"time"

	"bighive/testkit/cluster"
)

// TestBigtableChapter runs the Cloud Bigtable API chapter against a
// cluster of real processes (master, tserver, frontend): each of its
// steps checks its own result, so a wrong answer from the frontend fails
// it.
func TestBigtableChapter(t *testing.T) {
	if testing.Short() {
		t.Skip("the Bigtable API chapter on a cluster of real processes: runs without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Masters: 1, TServers: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out strings.Builder
	err = bigtableChapter(ctx, &tour{out: &out, began: time.Now()}, c)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"matched", "→ 10", "SampleRowKeys", "10 rows left", "DeleteTable"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("chapter output lacks %q", want)
		}
	}
}
