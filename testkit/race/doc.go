// Package race says whether the race detector is built in (Enabled), so
// that a test can size its load or skip a timing check under -race, where
// code runs several times slower and memory costs several times more.
// It imports nothing, so any package's tests use it.
package race
