package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"bighive/testkit/wait"
	"bighive/tserver"
)

// TestTabletsSpaceOnRealCluster: `bighive tablets` reports the space of
// a tablet's TSFiles: after a third of its entries became row tombstones,
// file bytes, a compression ratio below 1 for repeated text, a tombstone
// share of a third and live bytes below the file bytes; after `compact
// --major` fewer file bytes, at most one tombstone (the entry of highest
// sequence a major compaction keeps, see tablet.CompactFiles) and half
// the entries. The text table has the columns. (The garbage-share trigger is off, so only the
// requested compaction runs.)
func TestTabletsSpaceOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startClusterWith(t, func(o *tserver.Options) { o.CompactionGarbageShare = -1 })}
	r.ok("create", "t1", "--families", "cf")
	// Serving means the tserver holds a lease, which a checkpoint needs.
	r.waitFor("serving", "tablets", "t1")
	r.ok("checkpoint") // nothing yet
	value := strings.Repeat("the same text again and again ", 20)
	for i := range 60 {
		r.ok("put", "t1", fmt.Sprintf("row%03d", i), "cf:q", value)
	}
	r.ok("checkpoint")
	for i := range 30 {
		r.ok("delete", "t1", fmt.Sprintf("row%03d", i))
	}
	r.ok("checkpoint")
	type space struct {
		Size       int64    `json:"size_bytes"`
		Files      *int64   `json:"file_bytes"`
		Live       int64    `json:"live_bytes"`
		Ratio      float64  `json:"compression_ratio"`
		Tombstone  *float64 `json:"tombstone_share"`
		Entries    int64    `json:"entries"`
		Tombstones int64    `json:"tombstones"`
	}
	// poll reads `--json tablets` until ok accepts the tablet's space.
	poll := func(stage string, ok func(s space) bool) space {
		t.Helper()
		var s space
		wait.For(t, 30*time.Second, stage+": the tablet space expected", func() error {
			s = space{}
			out := r.ok("--json", "tablets", "t1")
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil {
				t.Fatalf("--json tablets printed %q: %v", out, err)
			}
			if s.Files == nil || s.Tombstone == nil || !ok(s) {
				return fmt.Errorf("space %+v", s)
			}
			return nil
		})
		return s
	}
	before := poll("after the deletes", func(s space) bool { return *s.Tombstone > 0.3 })
	t.Logf("after the deletes: %+v (file bytes %d, tombstone share %.3f)", before, *before.Files, *before.Tombstone)
	if *before.Tombstone > 0.34 || *before.Files <= 0 || before.Size < *before.Files || before.Live >= *before.Files || before.Ratio <= 0 || before.Ratio >= 0.5 {
		t.Fatalf("after deleting 30 of 60 rows: %+v (file bytes %d, tombstone share %.3f); want a share of 1/3, live < file bytes ≤ size, ratio in (0, 0.5)",
			before, *before.Files, *before.Tombstone)
	}
	r.ok("compact", "t1", "--major")
	after := poll("after compact --major", func(s space) bool { return s.Entries < before.Entries })
	t.Logf("after compact --major: %+v (file bytes %d)", after, *after.Files)
	if *after.Files >= *before.Files || after.Tombstones > 1 || after.Entries > 31 || after.Live < *after.Files*9/10 {
		t.Fatalf("after compact --major: %+v (file bytes %d), before %d; want fewer file bytes, ≤ 1 tombstone, ≤ 31 entries, ≥ 90%% live", after, *after.Files, *before.Files)
	}
	out := r.ok("tablets", "t1")
	for _, col := range []string{"LIVE", "FILES", "RATIO", "TOMBSTONES", "%"} {
		if !strings.Contains(out, col) {
			t.Fatalf("tablets printed no %s:\n%s", col, out)
		}
	}
}

// TestGarbageShareCompactsOnRealCluster: with the default policy, a
// tablet of which half the rows were deleted is major-compacted without
// being asked (--compaction-garbage-share 0.2): `bighive tablets` soon
// reports at most the live entries and one more, and the live rows read
// back.
func TestGarbageShareCompactsOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "t1", "--families", "cf")
	r.waitFor("serving", "tablets", "t1")
	for i := range 40 {
		r.ok("put", "t1", fmt.Sprintf("row%03d", i), "cf:q", fmt.Sprintf("value %d", i))
	}
	r.ok("checkpoint")
	for i := range 20 {
		r.ok("delete", "t1", fmt.Sprintf("row%03d", i))
	}
	r.ok("checkpoint")
	wait.For(t, 30*time.Second, "an automatic major compaction", func() error {
		var s struct {
			Entries    *int64 `json:"entries"`
			Tombstones int64  `json:"tombstones"`
		}
		out := r.ok("--json", "tablets", "t1")
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil {
			t.Fatalf("--json tablets printed %q: %v", out, err)
		}
		if s.Entries == nil || *s.Entries > 21 || *s.Entries <= 0 {
			return fmt.Errorf("tablets: %s", out)
		}
		if s.Tombstones > 1 {
			t.Fatalf("after the automatic major compaction: %s; want at most one tombstone", out)
		}
		return nil
	})
	out := r.ok("scan", "t1")
	for i := range 40 {
		if got, want := strings.Contains(out, fmt.Sprintf("value %d\n", i)) || strings.Contains(out, fmt.Sprintf("value %d ", i)), i >= 20; got != want {
			t.Fatalf("row%03d shown %v after the compaction, want %v:\n%s", i, got, want, out)
		}
	}
}
