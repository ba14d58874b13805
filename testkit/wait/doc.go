// Package wait is the one "poll until a condition holds or time out"
// helper of Bighive's tests.
//
// A condition is a func() error: nil when it holds, otherwise an error
// saying what it saw, so that a timeout reports the last thing seen and
// not only that time ran out:
//
//	wait.For(t, 10*time.Second, "both tablets served", func() error {
//		if n := served(); n != 2 {
//			return fmt.Errorf("%d tablets served", n)
//		}
//		return nil
//	})
//
// For waits at most a duration, ForCtx until a context ends; both fail
// the test (t.Fatalf) on a timeout, naming what was awaited and the
// condition's last error. Until is the variant that fails nothing: it
// returns the error instead, for callers that handle a timeout themselves
// and for test harness code without a testing.TB.
//
// The condition runs on the caller's goroutine, so it may call t.Fatal.
// It is called at once, then after pauses growing from 1 ms to 20 ms: a
// condition that is about to hold is seen quickly, and a long wait does
// not spin.
//
// The package imports nothing from the bighive module, so the tests of
// any package, and the test helper packages, import it without a cycle.
package wait
