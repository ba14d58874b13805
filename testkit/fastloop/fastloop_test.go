package fastloop_test

import (
	"flag"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"bighive/testkit/fastloop"
)

func TestMain(m *testing.M) { fastloop.Main(m) }

var running, most atomic.Int32

// TestWidened: under -short (and no -test.parallel) Parallel tests run at
// once; otherwise the flag is Go's.
func TestWidened(t *testing.T) {
	want := int32(max(fastloop.Parallel, runtime.GOMAXPROCS(0)))
	got := flag.Lookup("test.parallel").Value.String()
	if testing.Short() && got != strconv.Itoa(int(want)) {
		t.Fatalf("-test.parallel is %s under -short, want %d", got, want)
	}
	for i := range want {
		t.Run(strconv.Itoa(int(i)), func(t *testing.T) {
			t.Parallel()
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
			running.Add(-1)
		})
	}
	t.Cleanup(func() {
		if testing.Short() && most.Load() != want {
			t.Errorf("%d parallel tests ran at once under -short, want %d", most.Load(), want)
		}
	})
}
