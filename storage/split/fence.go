package split

// Fenced returns a DualWrite that refuses every write with ErrFenced and
// logs nothing: a tablet routed through it takes no write until it is
// routed back to nil. A merge (package merge) fences both its parents with
// it, as a split fences its parent at step 6.
func Fenced() *DualWrite { return &DualWrite{fenced: true} }
