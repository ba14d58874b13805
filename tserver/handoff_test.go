package tserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"bighive/client"
	"bighive/master"
	"bighive/testkit/wait"
	"bighive/tserver"
)

// logged keeps the records of the messages it is asked for.
type logged struct {
	msgs map[string]bool
	mu   sync.Mutex
	recs []map[string]string
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logged) WithGroup(string) slog.Handler            { return l }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	if !l.msgs[r.Message] {
		return nil
	}
	rec := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { rec[a.Key] = a.Value.String(); return true })
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.mu.Unlock()
	return nil
}

func (l *logged) find(msg, tablet string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r["msg"] == msg && r["tablet"] == tablet {
			return r
		}
	}
	return nil
}

// TestMoveHandsOffFlushed: a tablet the master moves to a new tserver is
// flushed by its old owner before it lets go (the first flush while it
// takes writes, the second with its writes fenced, which empties its list
// of log positions), so its new owner reads no log for it, and every row
// written before reads back.
func TestMoveHandsOffFlushed(t *testing.T) {
	t.Parallel()
	big := func(o *tserver.Options) { o.MemLimit = 64 << 20 }
	first := &logged{msgs: map[string]bool{"tablet handed off": true}}
	n := startNodeWith(t, 1, func(c *master.Config) {
		c.TickInterval, c.StartupGrace, c.RebalanceWarmup = 50*time.Millisecond, -1, -1
	}, func(_ int, o *tserver.Options) { big(o); o.Logger = slog.New(first) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := n.client(ctx)
	tbl := createServing(t, ctx, c, "m")
	// Over handoffPreflush in each tablet: the handoff flushes twice.
	value := func(row string) []byte { return []byte(strings.Repeat(row, 100)) }
	var rows []string
	for i := range 2000 {
		rows = append(rows, fmt.Sprintf("a%05d", i), fmt.Sprintf("n%05d", i))
	}
	for _, row := range rows {
		if err := tbl.Put(ctx, row, "cf", "q", value(row)); err != nil {
			t.Fatal(err)
		}
	}

	second := &logged{msgs: map[string]bool{"tablet serving": true}}
	n.add(func(o *tserver.Options) { big(o); o.Logger = slog.New(second) })
	addr := n.opts[1].Listen
	var moved client.TabletInfo
	wait.ForCtx(t, ctx, "a tablet moved to the second tserver", func() error {
		tabs, err := c.Tablets(ctx, "t")
		if err != nil {
			return err
		}
		for _, tb := range tabs {
			if tb.TServer == addr && tb.State == "serving" {
				moved = tb
				return nil
			}
		}
		return fmt.Errorf("tablets %+v", tabs)
	})
	// Each tserver logs after what the master shows: the old owner once it
	// let go, the new one once its load report was answered.
	var h, s map[string]string
	wait.ForCtx(t, ctx, "both tservers' log lines of the move", func() error {
		h, s = first.find("tablet handed off", moved.ID), second.find("tablet serving", moved.ID)
		if h == nil || s == nil {
			return fmt.Errorf("handed off %v, serving %v", h, s)
		}
		return nil
	})
	if h["flushed"] != "true" {
		t.Fatalf("the old owner's handoff of %s: %v, want flushed", moved.ID, h)
	}
	if s["records"] != "0" || s["log_files"] != "0" {
		t.Fatalf("the new owner's load of %s: %v, want no log file read, no record replayed", moved.ID, s)
	}
	t.Logf("handoff of %s took %s, writes fenced %s; the new owner's load took %s", moved.ID, h["took"], h["writes_fenced"], s["took"])
	for _, row := range rows {
		r, err := tbl.Get(ctx, row)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := r.Value("cf", "q"); string(v) != string(value(row)) {
			t.Fatalf("row %s after the move: %d bytes, want %d", row, len(v), len(value(row)))
		}
	}
}
