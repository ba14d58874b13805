package bench

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/testkit/wait"
)

// lockedBuilder is a strings.Builder safe for the progress goroutine and
// the test together.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProgress: a rate line per tick, each overwriting the last on a
// terminal (carriage return and erase, no newline, erased at the end),
// plain lines otherwise.
func TestProgress(t *testing.T) {
	for _, tty := range []bool{false, true} {
		var out lockedBuilder
		r := &runner{opts: Options{Progress: &out, ProgressTTY: tty, ProgressEvery: 5 * time.Millisecond}}
		var rows atomic.Int64
		rows.Store(42)
		stop := r.progress("randomWrite", time.Now(), &rows)
		wait.For(t, 10*time.Second, fmt.Sprintf("tty %v: two progress lines", tty), func() error {
			if s := out.String(); strings.Count(s, "randomWrite") < 2 {
				return fmt.Errorf("progress %q", s)
			}
			return nil
		})
		stop()
		s := out.String()
		if !strings.Contains(s, "42 rows)") || !strings.Contains(s, "rows/s") {
			t.Errorf("tty %v: progress %q lacks the rate and the count", tty, s)
		}
		if tty && (strings.Contains(s, "\n") || !strings.HasPrefix(s, "\r\033[K") || !strings.HasSuffix(s, "\r\033[K")) {
			t.Errorf("terminal progress %q: want lines overwritten in place and erased at the end", s)
		}
		if !tty && (strings.Contains(s, "\r") || !strings.HasSuffix(s, "\n")) {
			t.Errorf("plain progress %q: want one line per tick", s)
		}
	}
}
