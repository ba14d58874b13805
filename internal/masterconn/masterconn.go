// Package masterconn is a connection to the master cluster that follows
// the leader: a call goes to the master believed to lead; an Unavailable
// reply with a NotLeader detail redirects it to the named leader, and other
// Unavailable replies (no leader yet, a master down) are retried on the
// next master with exponential backoff and jitter until the context ends.
//
// Every other error is returned as the master gave it, so a caller sees
// InvalidArgument, NotFound, FailedPrecondition … unchanged.
package masterconn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// Conn is safe for concurrent use.
type Conn struct {
	mu     sync.Mutex
	addrs  []string
	conns  map[string]*grpc.ClientConn
	leader int // index into addrs of the master to try first
	closed bool
}

// ErrClosed is returned by calls on a closed Conn.
var ErrClosed = errors.New("masterconn: closed")

// New makes a Conn over the given master gRPC addresses. It dials lazily.
func New(addrs []string) (*Conn, error) {
	if len(addrs) == 0 {
		return nil, apierr.InvalidArgument("no master addresses given")
	}
	return &Conn{addrs: append([]string(nil), addrs...), conns: map[string]*grpc.ClientConn{}}, nil
}

// Addrs returns the master addresses.
func (c *Conn) Addrs() []string { return append([]string(nil), c.addrs...) }

func (c *Conn) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), limits.GRPCCallOptions())
	if err != nil {
		return nil, fmt.Errorf("masterconn: dial %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

func (c *Conn) current() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader, c.addrs[c.leader]
}

// follow makes the master at addr (if known) or the one after i the next
// to try.
func (c *Conn) follow(i int, hint string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader != i {
		return // another call moved on already
	}
	if hint != "" {
		for j, a := range c.addrs {
			if a == hint {
				c.leader = j
				return
			}
		}
		// A leader we were not told about (a master added later).
		c.addrs = append(c.addrs, hint)
		c.leader = len(c.addrs) - 1
		return
	}
	c.leader = (i + 1) % len(c.addrs)
}

// Call runs fn against the leader, redirecting and retrying as the package
// comment says.
func (c *Conn) Call(ctx context.Context, fn func(ctx context.Context, m pb.MasterClient) error) error {
	backoff := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		i, addr := c.current()
		cc, err := c.conn(addr)
		if err != nil {
			return err
		}
		err = fn(ctx, pb.NewMasterClient(cc))
		if err == nil || apierr.CodeOf(err) != codes.Unavailable {
			return err
		}
		hint, redirected := apierr.LeaderHint(err)
		c.follow(i, hint)
		if redirected && hint != "" && hint != addr && attempt < 2*len(c.addrs) {
			continue // go straight to the named leader
		}
		if ctx.Err() != nil {
			return err
		}
		sleep := backoff/2 + time.Duration(rand.Int64N(int64(backoff)))
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("masterconn: %w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

// Close closes every connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	c.conns = nil
	return errors.Join(errs...)
}
