package wal

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
	"bighive/testkit/wait"
)

// setCohortWait sets the bounds of the flusher's wait for a cohort for
// one test.
func setCohortWait(t *testing.T, d time.Duration) {
	oldMin, oldMax := cohortWaitMin, cohortWaitMax
	cohortWaitMin, cohortWaitMax = d, d
	t.Cleanup(func() { cohortWaitMin, cohortWaitMax = oldMin, oldMax })
}

// releaseCohort makes the log release one batch of n appenders: it holds
// a first record's fdatasync until n more appenders are queued behind it.
// It returns once all n+1 records, from..from+n, are durable.
func releaseCohort(t *testing.T, l *Log, gate *syncGate, from, n int) {
	t.Helper()
	gate.arm()
	first := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), tabletOf(from), testMutation(from, 20))
		first <- err
	}()
	<-gate.entered
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := from + 1; i <= from+n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Append(context.Background(), tabletOf(i), testMutation(i, 20))
			errs <- err
		}()
	}
	wait.For(t, 10*time.Second, "the cohort queued", func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.cur.appenders != n {
			return fmt.Errorf("%d appenders queued", l.cur.appenders)
		}
		return nil
	})
	close(gate.release)
	if err := <-first; err != nil {
		t.Fatalf("Append: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
}

// waitingFor returns how many appenders the flusher waits for (0: none).
func waitingFor(l *Log) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.want
}

func appendAsync(l *Log, i int) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), tabletOf(i), testMutation(i, 20))
		done <- err
	}()
	return done
}

// TestCohortWaitJoinsStragglers: after a batch released 8 appenders, a
// lone record is not synced alone: the flusher waits until 4 appenders
// are back and writes them as one batch.
func TestCohortWaitJoinsStragglers(t *testing.T) {
	setCohortWait(t, time.Minute) // only the cohort ends the wait
	gate := newSyncGate()
	opts := testOptions(t.TempDir())
	opts.FS = errorfs.Wrap(vfs.Default, gate)
	l := openLog(t, opts)
	defer closeLog(t, l)
	releaseCohort(t, l, gate, 0, 8)
	before := l.Stats()
	straggler := appendAsync(l, 100)
	wait.For(t, 10*time.Second, "the flusher waiting for the cohort", func() error {
		if w := waitingFor(l); w != 4 {
			return fmt.Errorf("waiting for %d appenders", w)
		}
		return nil
	})
	if got := l.Stats().Batches; got != before.Batches {
		t.Fatalf("the straggler was written alone: %d batches, want %d", got, before.Batches)
	}
	rest := []<-chan error{straggler, appendAsync(l, 101), appendAsync(l, 102), appendAsync(l, 103)}
	for _, c := range rest {
		if err := <-c; err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	after := l.Stats()
	if b, r := after.Batches-before.Batches, after.Records-before.Records; b != 1 || r != 4 {
		t.Fatalf("the 4 records took %d batches (%d records), want 1", b, r)
	}
	if after.CohortWaits-before.CohortWaits != 1 || after.CohortExpired != before.CohortExpired {
		t.Fatalf("waits %d → %d, expired %d → %d: want one wait, not expired",
			before.CohortWaits, after.CohortWaits, before.CohortExpired, after.CohortExpired)
	}
}

// TestCohortWaitRunsOut: when the cohort does not come back, the lone
// record is written once the wait's bound passed, and the cohort is
// forgotten: the next lone record is not made to wait.
func TestCohortWaitRunsOut(t *testing.T) {
	setCohortWait(t, 20*time.Millisecond)
	gate := newSyncGate()
	opts := testOptions(t.TempDir())
	opts.FS = errorfs.Wrap(vfs.Default, gate)
	l := openLog(t, opts)
	releaseCohort(t, l, gate, 0, 8)
	before := l.Stats()
	if err := <-appendAsync(l, 100); err != nil {
		t.Fatalf("Append: %v", err)
	}
	mid := l.Stats()
	if mid.CohortWaits-before.CohortWaits != 1 || mid.CohortExpired-before.CohortExpired != 1 {
		t.Fatalf("waits %d → %d, expired %d → %d: want one expired wait",
			before.CohortWaits, mid.CohortWaits, before.CohortExpired, mid.CohortExpired)
	}
	if err := <-appendAsync(l, 101); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if got := l.Stats().CohortWaits; got != mid.CohortWaits {
		t.Fatalf("a lone record after an expired wait waited again: %d waits, want %d", got, mid.CohortWaits)
	}
	closeLog(t, l)
	recs, _ := replayAll(t, vfs.Default, opts.Root)
	if len(recs) != 11 {
		t.Fatalf("%d records replayed, want 11", len(recs))
	}
}

// TestCloseEndsCohortWait: Close during the flusher's wait writes the
// waiting record (its Append succeeds, it replays) and returns without
// waiting for the bound.
func TestCloseEndsCohortWait(t *testing.T) {
	setCohortWait(t, time.Hour)
	gate := newSyncGate()
	opts := testOptions(t.TempDir())
	opts.FS = errorfs.Wrap(vfs.Default, gate)
	l := openLog(t, opts)
	releaseCohort(t, l, gate, 0, 8)
	straggler := appendAsync(l, 100)
	wait.For(t, 10*time.Second, "the flusher waiting for the cohort", func() error {
		if w := waitingFor(l); w == 0 {
			return fmt.Errorf("not waiting")
		}
		return nil
	})
	closeLog(t, l)
	if err := <-straggler; err != nil {
		t.Fatalf("Append during Close: %v", err)
	}
	recs, _ := replayAll(t, vfs.Default, opts.Root)
	if len(recs) != 10 {
		t.Fatalf("%d records replayed, want 10", len(recs))
	}
}
