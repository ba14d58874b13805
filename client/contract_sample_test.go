package client_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"bighive/client"
)

// contractSampleRowKeys: samples are strictly increasing row keys of the
// table with non-decreasing offsets, every tablet boundary among them,
// the last one empty with (about) the table's size; an empty table's
// only sample is its end.
func contractSampleRowKeys(t *testing.T, e env, c *client.Client) {
	ctx := ctxT(t)
	empty := createTable(t, e, c, "sampleempty")
	if got, err := empty.SampleRowKeys(ctx); err != nil || !slices.Equal(got, []string{""}) {
		t.Fatalf("empty table: %q %v, want [\"\"]", got, err)
	}
	tbl := createTable(t, e, c, "sample", "m")
	const rows, value = 100, 512
	for i := 0; i < rows; i++ {
		for _, p := range []string{"a", "n"} { // both tablets
			if err := tbl.Put(ctx, fmt.Sprintf("%s%03d", p, i), "cf", "q", []byte(strings.Repeat("v", value))); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(stage string) {
		t.Helper()
		if got, err := tbl.SampleRowKeys(ctx); err != nil || !slices.Equal(got, []string{"m", ""}) {
			t.Fatalf("%s: SampleRowKeys = %q %v, want [m \"\"]", stage, got, err)
		}
		samples, err := tbl.SampleRowKeyOffsets(ctx, 16<<10)
		if err != nil {
			t.Fatal(err)
		}
		if len(samples) < 4 || samples[len(samples)-1].Key != "" || !slices.ContainsFunc(samples, func(s client.RowKeySample) bool { return s.Key == "m" }) {
			t.Fatalf("%s: samples %+v", stage, samples)
		}
		for i, s := range samples[:len(samples)-1] {
			if i > 0 && (s.Key <= samples[i-1].Key || s.OffsetBytes < samples[i-1].OffsetBytes) {
				t.Fatalf("%s: sample %d %+v after %+v", stage, i, s, samples[i-1])
			}
			if s.Key != "m" && !(len(s.Key) == 4 && (s.Key[0] == 'a' || s.Key[0] == 'n')) {
				t.Fatalf("%s: sample %q is not a row of the table", stage, s.Key)
			}
		}
		if total := samples[len(samples)-1].OffsetBytes; total < 2*rows*value || total > 4*rows*value {
			t.Fatalf("%s: table size %d, want about %d", stage, total, 2*rows*value)
		}
	}
	check("written")
	if err := e.restartAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.waitServing(ctx, "sample"); err != nil {
		t.Fatal(err)
	}
	check("after restarting the tservers")
	if _, err := tbl.SampleRowKeyOffsets(ctx, 1); err == nil {
		t.Fatal("a spacing of 1 byte was accepted")
	}
}
