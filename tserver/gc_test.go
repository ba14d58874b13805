package tserver_test

import (
	"os"
	"runtime/debug"
	"testing"

	"bighive/tserver"
)

// TestTuneGC checks that the tserver's GC settings follow its options and
// that GOGC and GOMEMLIMIT in the environment win.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	const mem, cache = 256 << 20, 64 << 20
	want := int64(2*mem + cache + 512<<20)
	if got := tserver.MemoryLimit(mem, cache); got != want {
		t.Fatalf("MemoryLimit = %d, want %d", got, want)
	}
	tests := []struct {
		name      string
		env       map[string]string
		percent   int
		wantGOGC  int
		wantLimit int64
	}{
		{"defaults", nil, 0, tserver.DefaultGCPercent, want},
		{"flag", nil, 250, 250, want},
		{"GOGC in the environment", map[string]string{"GOGC": "150"}, 0, 77, want},
		{"negative: Go's", nil, -1, 77, 123 << 20},
		{"GOMEMLIMIT in the environment", map[string]string{"GOMEMLIMIT": "1GiB"}, 0, tserver.DefaultGCPercent, 123 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// What the runtime read from the environment at start is set
			// here by hand: TuneGC must leave it alone.
			debug.SetGCPercent(77)
			debug.SetMemoryLimit(123 << 20)
			for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
				t.Setenv(k, "") // restored after the test
				os.Unsetenv(k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			gogc, limit := tserver.TuneGC(tc.percent, mem, cache)
			if gogc != tc.wantGOGC || limit != tc.wantLimit {
				t.Fatalf("TuneGC = GOGC %d, limit %d; want %d, %d", gogc, limit, tc.wantGOGC, tc.wantLimit)
			}
		})
	}
}
