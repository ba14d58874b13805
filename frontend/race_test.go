//go:build race

package frontend

// raceEnabled: the race detector is on; TestLargeRowsEmulatorHost then
// writes a 12 MiB cell and a 12 MiB row (largeSizes).
const raceEnabled = true
