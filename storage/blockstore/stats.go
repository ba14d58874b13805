package blockstore

// Stats are a block store's figures for metrics, read at call time.
type Stats struct {
	// Containers is the number of log containers (0 for the file
	// manager).
	Containers int64
	// LiveBytes is the size of the committed, undeleted blocks of the
	// log containers.
	LiveBytes int64
	// DeadBytes is the span of the containers' data files not held by
	// live blocks: deleted blocks (whether their holes are punched yet or
	// not), aborted ranges and the padding to file-system blocks.
	DeadBytes int64
	// HolePunches counts the hole punches since Open.
	HolePunches int64
	// OpenFiles is the descriptors the store's FileCache holds open (a
	// cache shared between stores counts for all of them); FileReopens how
	// often it reopened a file it had closed to stay within its capacity.
	OpenFiles   int64
	FileReopens int64
}

// Stats returns the store's figures.
func (fm *FsManager) Stats() Stats {
	var st Stats
	if m, ok := fm.Manager.(*logManager); ok {
		st = m.stats()
	}
	if fm.cache != nil {
		st.OpenFiles = int64(fm.cache.OpenDescriptors())
		st.FileReopens = fm.cache.Reopens()
	}
	return st
}

func (m *logManager) stats() Stats {
	m.cmu.Lock()
	cs := make([]*container, 0, len(m.containers))
	for _, c := range m.containers {
		cs = append(cs, c)
	}
	m.cmu.Unlock()
	st := Stats{Containers: int64(len(cs)), HolePunches: m.punches.Load()}
	for _, c := range cs {
		c.mu.Lock()
		st.LiveBytes += c.liveBytes
		st.DeadBytes += max(0, c.cursor-c.liveBytes)
		c.mu.Unlock()
	}
	return st
}
