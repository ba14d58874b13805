package wal

import (
	"math/bits"
	"sync"
	"time"
)

// Histogram counts values in power-of-two buckets: bucket 0 holds values
// ≤ 1, bucket i (i ≥ 1) values in (2^(i-1), 2^i]; the last bucket holds
// everything larger.
type Histogram [24]uint64

func (h *Histogram) add(v uint64) {
	i := 0
	if v > 1 {
		i = bits.Len64(v - 1)
	}
	if i >= len(h) {
		i = len(h) - 1
	}
	h[i]++
}

// Stats are the log's counters since Open, ready to export as metrics.
type Stats struct {
	Records uint64 // records made durable
	Bytes   uint64 // bytes written: records and file headers
	Batches uint64 // group-commit batches written
	Syncs   uint64 // fdatasync calls
	Files   uint64 // log files started
	// Recycled counts the files started from a kept retired file (of
	// Files), without preparing a new one.
	Recycled uint64
	// SyncTime is the total time spent in fdatasync; SyncMax the longest.
	SyncTime, SyncMax time.Duration
	// BatchRecords counts batches by their number of records.
	BatchRecords Histogram
	// SyncMicros counts fdatasync calls by their latency in µs.
	SyncMicros Histogram
	// CohortWaits counts the flusher's waits for the appenders of its
	// last batch to come back before it writes the next (see
	// awaitCohort); CohortExpired those that ended before half of them
	// were back.
	CohortWaits, CohortExpired uint64
}

type statsCounters struct {
	mu sync.Mutex
	s  Stats
}

func (c *statsCounters) sync(d time.Duration) {
	c.mu.Lock()
	c.s.Syncs++
	c.s.SyncTime += d
	c.s.SyncMax = max(c.s.SyncMax, d)
	c.s.SyncMicros.add(uint64(d.Microseconds()))
	c.mu.Unlock()
}

func (c *statsCounters) wait(expired bool) {
	c.mu.Lock()
	c.s.CohortWaits++
	if expired {
		c.s.CohortExpired++
	}
	c.mu.Unlock()
}

func (c *statsCounters) batch(records, bytes int) {
	c.mu.Lock()
	c.s.Batches++
	c.s.Records += uint64(records)
	c.s.Bytes += uint64(bytes)
	c.s.BatchRecords.add(uint64(records))
	c.mu.Unlock()
}

func (c *statsCounters) file(recycled bool) {
	c.mu.Lock()
	c.s.Files++
	if recycled {
		c.s.Recycled++
	}
	c.mu.Unlock()
}

// Stats returns a snapshot of the counters.
func (l *Log) Stats() Stats {
	l.stats.mu.Lock()
	defer l.stats.mu.Unlock()
	return l.stats.s
}
