package wal

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// This file holds every name the package puts on disk, each as a
// format/parse pair that round-trips: FormatPrefix/ParsePrefix for the
// per-tserver directory, FormatFileName/ParseFileName for the log files.

// Position is a log position (redo point): the log file of Prefix created
// at FileTS. Replaying from a Position reads that file and every later file
// of the same prefix. Positions of one prefix order by FileTS.
type Position struct {
	Prefix string // file-name-safe prefix, see FormatPrefix
	FileTS int64  // the file's creation timestamp, µs since the Unix epoch
}

func (p Position) String() string { return p.Prefix + "/" + FormatFileName(p.FileTS) }

// Before reports whether p names an earlier file than q of the same prefix.
func (p Position) Before(q Position) bool { return p.Prefix == q.Prefix && p.FileTS < q.FileTS }

const (
	walDir    = "wal"
	logSuffix = ".log"
	tsDigits  = 20 // enough for every non-negative int64
	// Prepared files are named prepared-<n>.tmp until the flusher renames
	// them; Open removes leftovers.
	preparedPrefix = "prepared-"
	// Retired files kept for recycling are named recycle-<n>.tmp while
	// they wait; Open removes leftovers.
	recyclePrefix = "recycle-"
)

// FormatPrefix turns a tserver address (host:port) into a file-name-safe
// prefix: ASCII letters, digits, '.' and '-' stay as they are; every other
// byte becomes '_' and two lower-case hex digits ("10.0.0.7:7070" →
// "10.0.0.7_3a7070"). A leading '.' is escaped too, so the prefix is never
// "." or ".." or hidden.
func FormatPrefix(addr string) string {
	var b strings.Builder
	for i := 0; i < len(addr); i++ {
		c := addr[i]
		if isSafe(c) && !(i == 0 && c == '.') {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02x", c)
	}
	return b.String()
}

// ParsePrefix returns the address a prefix made by FormatPrefix encodes. It
// rejects the empty string and every string FormatPrefix does not produce.
func ParsePrefix(prefix string) (string, error) {
	if prefix == "" {
		return "", fmt.Errorf("%w: empty prefix", ErrBadName)
	}
	var b []byte
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		if c != '_' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(prefix) {
			return "", fmt.Errorf("%w: prefix %q: short escape", ErrBadName, prefix)
		}
		v, err := strconv.ParseUint(prefix[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%w: prefix %q: bad escape", ErrBadName, prefix)
		}
		b = append(b, byte(v))
		i += 2
	}
	addr := string(b)
	if FormatPrefix(addr) != prefix {
		return "", fmt.Errorf("%w: prefix %q is not canonical", ErrBadName, prefix)
	}
	return addr, nil
}

func isSafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-'
}

// FormatFileName is the name of the log file created at ts (µs): ts in
// decimal, zero-padded to 20 digits so that names sort like timestamps, and
// ".log".
func FormatFileName(ts int64) string {
	return fmt.Sprintf("%0*d%s", tsDigits, ts, logSuffix)
}

// ParseFileName returns the timestamp of a name made by FormatFileName. It
// rejects every other name (including temporary files).
func ParseFileName(name string) (int64, error) {
	digits, ok := strings.CutSuffix(name, logSuffix)
	if !ok || len(digits) != tsDigits {
		return 0, fmt.Errorf("%w: %q is not a log file name", ErrBadName, name)
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, fmt.Errorf("%w: %q is not a log file name", ErrBadName, name)
		}
	}
	ts, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: %v", ErrBadName, name, err)
	}
	return ts, nil
}

// PrefixDir is the directory holding the log files of prefix under root.
func PrefixDir(root, prefix string) string { return filepath.Join(root, walDir, prefix) }

// FilePath is the path of the log file at pos under root.
func FilePath(root string, pos Position) string {
	return filepath.Join(PrefixDir(root, pos.Prefix), FormatFileName(pos.FileTS))
}
