package bench

// LatencyOf is latencyOf, for the external tests.
var LatencyOf = latencyOf
