package fleetsim

// splitCommits counts the log-split commands the masters applied: one
// per group of dead prefixes planned together (log_splits_done), or one
// per prefix from a leader of an older version (log_split_done).
func (w *world) splitCommits() float64 {
	return w.commands("log_splits_done") + w.commands("log_split_done")
}
