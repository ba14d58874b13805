//go:build race

package client_test

// raceEnabled: the race detector is on; the contract then skips the one
// case that sends a message of 100 MiB.
const raceEnabled = true
