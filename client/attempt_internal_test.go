package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAttemptCtx checks the attempt context against what a
// context.WithDeadline would do, for each way it is used: read without
// Done (the batch stream), waited on through Done (a unary call),
// derived from (gRPC's per-call context), and released.
func TestAttemptCtx(t *testing.T) {
	type key struct{}
	tests := []struct {
		name string
		run  func(t *testing.T, parent context.Context, cancel context.CancelFunc)
	}{
		{"deadline and value without a timer", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			d := time.Now().Add(time.Hour)
			a := newAttemptCtx(parent, time.Now(), d)
			if got, ok := a.Deadline(); !ok || !got.Equal(d) {
				t.Fatalf("Deadline() = %v %v, want %v", got, ok, d)
			}
			if a.Value(key{}) != "v" {
				t.Fatal("Value does not reach the caller's context")
			}
			if a.Err() != nil || a.timed.Load() != nil {
				t.Fatalf("Err() = %v, timer made %v: want nil and no timer", a.Err(), a.timed.Load() != nil)
			}
			if w, got := splitAttempt(a); w != parent || got != a || !got.deadline.Equal(d) {
				t.Fatal("splitAttempt does not give the caller's context and the attempt")
			}
		}},
		{"past deadline without a timer", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			a := newAttemptCtx(parent, time.Now(), time.Now().Add(-time.Millisecond))
			if !errors.Is(a.Err(), context.DeadlineExceeded) {
				t.Fatalf("Err() = %v, want DeadlineExceeded", a.Err())
			}
		}},
		{"Done closes at the deadline", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			a := newAttemptCtx(parent, time.Now(), time.Now().Add(20*time.Millisecond))
			defer a.release()
			select {
			case <-a.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("Done not closed 5 s after a 20 ms deadline")
			}
			if !errors.Is(a.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(a), context.DeadlineExceeded) {
				t.Fatalf("Err() = %v, Cause = %v, want DeadlineExceeded", a.Err(), context.Cause(a))
			}
		}},
		{"caller's cancel reaches a derived context", func(t *testing.T, parent context.Context, cancel context.CancelFunc) {
			a := newAttemptCtx(parent, time.Now(), time.Now().Add(time.Hour))
			defer a.release()
			child, stop := context.WithCancel(a)
			defer stop()
			cancel()
			select {
			case <-child.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("a context derived from the attempt did not end with the caller's")
			}
			if !errors.Is(a.Err(), context.Canceled) {
				t.Fatalf("Err() = %v, want Canceled", a.Err())
			}
		}},
		{"release ends a later Done", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			a := newAttemptCtx(parent, time.Now(), time.Now().Add(time.Hour))
			a.release()
			select {
			case <-a.Done():
			default:
				t.Fatal("Done after release is not closed")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
			defer cancel()
			tc.run(t, parent, cancel)
		})
	}
}
