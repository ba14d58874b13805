package checkpoint_test

import (
	"testing"
	"time"

	"bighive/storage/checkpoint"
)

// TestAdmitWriteExcludesExclusive: an admitted write holds off Exclusive
// (a split's switch to dual-writing, like a checkpoint's swap) until it is
// released, and a running Exclusive holds off new writes.
func TestAdmitWriteExcludesExclusive(t *testing.T) {
	c := checkpoint.New(checkpoint.Options{Logger: quiet, Tablets: func() []checkpoint.Tablet { return nil }})
	// A short look for a wrong early return; correctness does not depend
	// on the time, only how soon a broken lock is noticed.
	const look = 50 * time.Millisecond

	release := c.AdmitWrite()
	ran := make(chan struct{})
	go c.Exclusive(func() { close(ran) })
	select {
	case <-ran:
		t.Fatal("Exclusive ran while a write was admitted")
	case <-time.After(look):
	}
	release()
	<-ran

	inside, leave := make(chan struct{}), make(chan struct{})
	go c.Exclusive(func() { close(inside); <-leave })
	<-inside
	admitted := make(chan func())
	go func() { admitted <- c.AdmitWrite() }()
	select {
	case <-admitted:
		t.Fatal("a write was admitted inside Exclusive")
	case <-time.After(look):
	}
	close(leave)
	(<-admitted)()

	// Writes share the lock.
	r1, r2 := c.AdmitWrite(), c.AdmitWrite()
	r1()
	r2()
}
