package tserver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
)

// TestBatchStreamRealPath: concurrent callers of the client's default
// batch stream against a real tserver each get their own result — puts
// that are durable across a restart, gets, and one put of an unknown
// family that fails alone with InvalidArgument — and after the tserver
// restarts, the client opens a new stream and goes on.
func TestBatchStreamRealPath(t *testing.T) {
	t.Parallel()
	n := startNode(t, 1, 2*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := n.client(ctx)
	tbl := createServing(t, ctx, c, "m")
	for _, k := range []string{"a-pre", "z-pre"} {
		if err := tbl.Put(ctx, k, "cf", "q", []byte("pre-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	const callers = 64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			side := "az"[i%2]
			for j := range 20 {
				key := fmt.Sprintf("%c-%02d-%02d", side, i, j)
				var err error
				switch {
				case i == 7 && j == 10:
					if err = tbl.Put(ctx, key, "nofam", "q", nil); status.Code(err) == codes.InvalidArgument {
						err = nil
					} else {
						err = fmt.Errorf("unknown family: %v, want InvalidArgument", err)
					}
				case j%3 == 2:
					var r client.Row
					r, err = tbl.Get(ctx, fmt.Sprintf("%c-pre", side))
					if v, _ := r.Value("cf", "q"); err == nil && string(v) != fmt.Sprintf("pre-%c-pre", side) {
						err = fmt.Errorf("get returned %q", v)
					}
				default:
					err = tbl.Put(ctx, key, "cf", "q", []byte(key))
				}
				if err != nil {
					errs[i] = fmt.Errorf("call %d: %w", j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if err := n.servers[0].Close(); err != nil {
		t.Fatal(err)
	}
	n.start(0)
	waitServing(t, ctx, c, "t")
	for i := range callers {
		for j := range 20 {
			key := fmt.Sprintf("%c-%02d-%02d", "az"[i%2], i, j)
			r, err := tbl.Get(ctx, key)
			if err != nil {
				t.Fatalf("get %s after restart: %v", key, err)
			}
			v, ok := r.Value("cf", "q")
			if want := j%3 != 2 && !(i == 7 && j == 10); ok != want || ok && string(v) != key {
				t.Fatalf("row %s after restart: %q (found %v), want found %v", key, v, ok, want)
			}
		}
	}
}
