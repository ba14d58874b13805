package wait_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"bighive/testkit/wait"
)

// recorder is a testing.TB that records a Fatalf instead of ending the
// test, so that the test can look at the message.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	// Like t.Fatalf, end the goroutine: For must not go on after it.
	runtime.Goexit()
}

// failing runs f on its own goroutine against a recorder and returns the
// message it failed with ("" if none).
func failing(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	took := wait.For(t, 10*time.Second, "the third call", func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
	if took > 5*time.Second {
		t.Fatalf("took %v for three tries", took)
	}
	// A condition that holds at once is called once.
	calls = 0
	wait.ForCtx(t, context.Background(), "the first call", func() error { calls++; return nil })
	if calls != 1 {
		t.Fatalf("cond called %d times, want 1", calls)
	}
}

func TestForTimeoutNamesWhatAndTheLastError(t *testing.T) {
	n := 0
	began := time.Now()
	msg := failing(t, func(tb testing.TB) {
		wait.For(tb, 100*time.Millisecond, "the flag", func() error {
			n++
			return fmt.Errorf("flag unset after %d tries", n)
		})
		tb.Errorf("For returned after its timeout")
	})
	if d := time.Since(began); d < 100*time.Millisecond {
		t.Errorf("failed after %v, before its 100ms timeout", d)
	}
	last := fmt.Sprintf("flag unset after %d tries", n)
	for _, want := range []string{"the flag", last, "100ms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not contain %q", msg, want)
		}
	}
	if n < 2 {
		t.Errorf("cond called %d times in 100ms", n)
	}
}

func TestForCtxTimeoutNamesWhatAndTheLastError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	msg := failing(t, func(tb testing.TB) {
		wait.ForCtx(tb, ctx, "the answer", func() error { return errors.New("no answer yet") })
	})
	for _, want := range []string{"the answer", "no answer yet", context.DeadlineExceeded.Error()} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not contain %q", msg, want)
		}
	}
}

func TestUntilRespectsCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	errNotYet := errors.New("not yet")
	go func() {
		time.Sleep(20 * time.Millisecond) // let Until try a few times first
		cancel()
	}()
	began := time.Now()
	err := wait.Until(ctx, func() error { calls++; return errNotYet })
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("Until returned %v after the cancellation", d)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errNotYet) {
		t.Fatalf("Until = %v, want context.Canceled and the last error", err)
	}
	// Once ctx has ended, cond is not called.
	before := calls
	if err := wait.Until(ctx, func() error { calls++; return nil }); !errors.Is(err, context.Canceled) || calls != before {
		t.Fatalf("Until on an ended context = %v after %d calls, want context.Canceled and none", err, calls-before)
	}
	if err := wait.Until(context.Background(), func() error { return nil }); err != nil {
		t.Fatalf("Until of a holding condition = %v", err)
	}
}
