//go:build !race

package race

// Enabled: the race detector is built in.
const Enabled = false
