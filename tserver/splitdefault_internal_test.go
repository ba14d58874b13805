package tserver

import (
	"testing"

	"bighive/master"
)

// TestSplitThresholdDefaultMatchesMaster: the master's default
// --split-threshold, from which its merge threshold and the merger's
// bound on a merged tablet follow, is the tservers' default.
func TestSplitThresholdDefaultMatchesMaster(t *testing.T) {
	if defaultSplitThreshold != master.DefaultSplitThreshold {
		t.Fatalf("tserver default split threshold %d, master's %d: change both", defaultSplitThreshold, master.DefaultSplitThreshold)
	}
}
