package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The pause after each failed try doubles from minPause up to maxPause.
const (
	minPause = time.Millisecond
	maxPause = 20 * time.Millisecond
)

// For calls cond until it returns nil and returns how long that took.
// When timeout passes first it fails t, naming what and cond's last
// error.
func For(t testing.TB, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began := time.Now()
	if err := Until(ctx, cond); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, lastErr(err))
	}
	return time.Since(began)
}

// ForCtx calls cond until it returns nil and returns how long that took.
// When ctx ends first it fails t, naming what, ctx's error and cond's
// last error.
func ForCtx(t testing.TB, ctx context.Context, what string, cond func() error) time.Duration {
	t.Helper()
	began := time.Now()
	if err := Until(ctx, cond); err != nil {
		t.Fatalf("gave up after %v waiting for %s: %v", time.Since(began).Round(time.Millisecond), what, err)
	}
	return time.Since(began)
}

// Until calls cond until it returns nil or ctx ends. It returns nil once
// cond did; otherwise ctx's error joined with cond's last error (or ctx's
// error alone when cond was never called because ctx had already ended).
// It fails no test.
func Until(ctx context.Context, cond func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := cond()
	if err == nil {
		return nil
	}
	pause := minPause
	timer := time.NewTimer(pause)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return &timeoutError{ctx: ctx.Err(), last: err}
		case <-timer.C:
		}
		if err = cond(); err == nil {
			return nil
		}
		pause = min(2*pause, maxPause)
		timer.Reset(pause)
	}
}

// timeoutError is Until's error when ctx ended before cond held.
type timeoutError struct {
	ctx, last error
}

func (e *timeoutError) Error() string   { return e.ctx.Error() + "; last: " + e.last.Error() }
func (e *timeoutError) Unwrap() []error { return []error{e.ctx, e.last} }

// lastErr is cond's last error in Until's err, or err itself.
func lastErr(err error) error {
	var te *timeoutError
	if errors.As(err, &te) {
		return te.last
	}
	return err
}
