package blockstore

import (
	"errors"
	"fmt"
)

// Named errors; check them with errors.Is.
var (
	ErrNotFound          = errors.New("blockstore: block not found")
	ErrInvalidArgument   = errors.New("blockstore: invalid argument")
	ErrBlockState        = errors.New("blockstore: operation not allowed in the block's state")
	ErrOutOfRange        = errors.New("blockstore: read past the end of the block")
	ErrReadOnly          = errors.New("blockstore: store opened read-only")
	ErrContainerReadOnly = errors.New("blockstore: container is read-only after an I/O error")
	ErrClosed            = errors.New("blockstore: manager closed")
	ErrTransactionDone   = errors.New("blockstore: transaction already committed")
	ErrForeignBlock      = errors.New("blockstore: block belongs to another manager")
	ErrCorruption        = errors.New("blockstore: corruption")

	// FsManager errors.
	ErrUUIDMismatch  = errors.New("blockstore: mismatched UUIDs across filesystem roots")
	ErrKindMismatch  = errors.New("blockstore: data directory belongs to another block manager kind")
	ErrLocked        = errors.New("blockstore: data directory is locked")
	ErrNotFormatted  = errors.New("blockstore: no instance file in any root")
	ErrRootNotEmpty  = errors.New("blockstore: new root is not empty")
	ErrDirFailed     = errors.New("blockstore: data directory failed")
	ErrAllDirsFailed = errors.New("blockstore: every data directory failed")
	ErrNoSpace       = errors.New("blockstore: no data directory has space")
	ErrUnknownDir    = errors.New("blockstore: unknown data directory UUID")
)

// CorruptionError is on-disk data that cannot be trusted: it names the file
// and the byte offset. errors.Is(err, ErrCorruption) holds for it.
type CorruptionError struct {
	File   string
	Offset int64
	Reason string
	Err    error // underlying cause, may be nil
}

func (e *CorruptionError) Error() string {
	s := fmt.Sprintf("blockstore: corruption in %s at offset %d: %s", e.File, e.Offset, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrCorruption and the cause.
func (e *CorruptionError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorruption, e.Err}
	}
	return []error{ErrCorruption}
}
