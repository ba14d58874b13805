// Package faultfile is the crash point of the multi-process e2e tests: a
// process started with a fault file (a --*-fault-file flag) calls Hook's
// function at each step of a protocol (a split, a merge), and the step the
// file names kills the process with SIGKILL at once, as a crash would.
//
// The file holds a step number N, or "pause:N". The first call for step N
// removes the file (so the step fires once, and a test sees it fired when
// the file is gone) and then either dies with SIGKILL, no cleanup, or, for
// "pause:N", holds the step for Pause and goes on, so the test can kill
// another process meanwhile. A missing file, or one naming another step,
// does nothing. Several processes may share one file (every master of a
// cluster, say): only the one that reaches the step first acts.
package faultfile

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Pause is how long a "pause:N" file holds step N.
const Pause = 5 * time.Second

// Hook returns the step function of the fault file at path, or nil when
// path is empty. what names the protocol in the log ("split", "merge").
func Hook[S ~int](path, what string, log *slog.Logger) func(S) error {
	if path == "" {
		return nil
	}
	return func(s S) error {
		switch act(path, int(s)) {
		case pause:
			log.Warn(what+" fault file: holding this step", "step", int(s), "for", Pause)
			time.Sleep(Pause)
		case kill:
			log.Warn(what+" fault file: killing this process", "step", int(s))
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}
}

type action int

const (
	none action = iota
	kill
	pause
)

// act reads the file and, when it names step, removes it and says what to
// do. Of several processes racing for one file, only the one whose remove
// succeeds acts.
func act(path string, step int) action {
	b, err := os.ReadFile(path)
	if err != nil {
		return none
	}
	text, paused := strings.CutPrefix(strings.TrimSpace(string(b)), "pause:")
	if n, err := strconv.Atoi(text); err != nil || n != step {
		return none
	}
	if err := os.Remove(path); err != nil {
		return none // another process took it
	}
	if paused {
		return pause
	}
	return kill
}
