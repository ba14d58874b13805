// Package fastloop widens the fast loop (go test -short) of a package
// whose tests wait on timers and sockets rather than on the CPU: under
// -short, and unless -test.parallel was given, up to Parallel (or
// GOMAXPROCS, if more) of its parallel tests run at once instead of
// GOMAXPROCS. The full run (-race,
// no -short) keeps Go's default, where the race detector makes the same
// tests CPU-bound. It imports nothing from the module, so any package's
// tests use it.
package fastloop

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// Parallel is how many parallel tests run at once in the fast loop: most
// start an in-process cluster and wait for it, and on a 2-core machine
// four waiting at once keep the cores busy.
const Parallel = 4

// Main is a TestMain's body: it widens the fast loop, runs the tests, then
// after (each, if not nil, after the run, before the exit).
func Main(m *testing.M, after ...func()) {
	flag.Parse()
	if testing.Short() && !set("test.parallel") {
		_ = flag.Set("test.parallel", strconv.Itoa(max(Parallel, runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// set reports whether the named flag was given on the command line.
func set(name string) (found bool) {
	flag.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
