package tserver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"bighive/client"
	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
	"bighive/storage/wal"
	"bighive/testkit/wait"
	"bighive/tserver"
)

// TestFailedLogStopsTheTServer fails tserver 0's write-ahead log under
// writers (ENOSPC on writing or preallocating a log file, EIO on its
// fdatasync) and checks that it fails stop: Done closes with an error
// wrapping wal.ErrFailed and the errno, the master moves its tablets to
// tserver 1, and every acknowledged write reads back there.
func TestFailedLogStopsTheTServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		kinds []errorfs.OpKind
		errno syscall.Errno
	}{
		{"ENOSPC on write", []errorfs.OpKind{errorfs.OpWrite, errorfs.OpPreallocate}, syscall.ENOSPC},
		{"EIO on sync", []errorfs.OpKind{errorfs.OpSync}, syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.errno == syscall.EIO {
				t.Skip("a failed fdatasync stopping the tserver: runs without -short")
			}
			inLog := func(op errorfs.Op) bool { return strings.Contains(op.Path, "/wal/") }
			tog := errorfs.NewToggle(errorfs.And(errorfs.Kinds(tc.kinds...), inLog))
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if tog.MaybeError(op) != nil {
					return tc.errno
				}
				return nil
			})
			n := startNode(t, 2, 2*time.Second, func(i int, o *tserver.Options) {
				if i == 0 {
					o.FS = errorfs.Wrap(vfs.Default, inj)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c := n.client(ctx)
			wait.ForCtx(t, ctx, "both tservers registered", func() error {
				ts, err := c.TServers(ctx)
				live := 0
				for _, x := range ts {
					if x.Live {
						live++
					}
				}
				if err == nil && live != 2 {
					err = fmt.Errorf("%d live", live)
				}
				return err
			})
			if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}},
				SplitKeys: []string{"r02", "r04", "r06", "r08"}}); err != nil {
				t.Fatal(err)
			}
			waitServing(t, ctx, c, "t")
			tbl, err := c.Open(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			bad := n.servers[0].Addr()
			onBad := func() int {
				tablets, err := c.Tablets(ctx, "t")
				if err != nil {
					t.Fatal(err)
				}
				k := 0
				for _, tb := range tablets {
					if tb.TServer == bad {
						k++
					}
				}
				return k
			}
			if onBad() == 0 {
				t.Fatal("tserver 0 serves no tablet; the test would prove nothing")
			}

			stop := make(chan struct{})
			a, wg := writeLoad(ctx, t, tbl, 7, 4, stop)
			stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
			defer stopWriters()
			wait.ForCtx(t, ctx, "200 acknowledged writes", func() error { return ackedAtLeast(a, 200) })
			tog.Set(true)

			select {
			case <-n.servers[0].Done():
			case <-ctx.Done():
				t.Fatal("tserver 0 still runs after its log failed")
			}
			err = n.servers[0].Err()
			if !errors.Is(err, wal.ErrFailed) || !errors.Is(err, tc.errno) {
				t.Fatalf("Err() = %v, want wal.ErrFailed wrapping %v", err, tc.errno)
			}
			t.Logf("tserver 0 stopped: %v", err)
			before := len(a.snapshot())
			wait.ForCtx(t, ctx, "every tablet served by tserver 1", func() error {
				tablets, err := c.Tablets(ctx, "t")
				if err != nil {
					return err
				}
				for _, tb := range tablets {
					if tb.State != "serving" || tb.TServer == bad {
						return fmt.Errorf("tablet %s %s on %s", tb.StartRow, tb.State, tb.TServer)
					}
				}
				return nil
			})
			wait.ForCtx(t, ctx, "writes acknowledged after the move", func() error { return ackedAtLeast(a, before+100) })
			stopWriters()
			want := a.snapshot()
			t.Logf("%d acknowledged rows, %d of them before the failure stopped tserver 0", len(want), before)
			checkRows(t, ctx, tbl, want)
		})
	}
}

// ackedAtLeast is nil once a holds n acknowledged rows.
func ackedAtLeast(a *acked, n int) error {
	if got := len(a.snapshot()); got < n {
		return fmt.Errorf("%d acknowledged rows", got)
	}
	return nil
}
