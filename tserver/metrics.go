package tserver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/wal"
)

// metrics are the tserver's Prometheus metrics. Most figures are read at
// scrape time from the stats the parts keep anyway (the log, the block
// cache, the block store, the checkpoint coordinator, the tablets): see
// collector. The histograms and counters here are the events nothing
// else counts. Nothing is labelled per tablet.
type metrics struct {
	reg *prometheus.Registry

	throttled      prometheus.Counter
	heartbeat      prometheus.Histogram
	recoveries     prometheus.Histogram
	recoveryFailed prometheus.Counter
	logSplits      prometheus.Histogram
	splits         prometheus.Histogram
	splitFailed    prometheus.Counter
	checkpoints    prometheus.Histogram
	flushedBytes   prometheus.Counter
	compactions    *prometheus.HistogramVec
	compactIn      prometheus.Counter
	compactOut     prometheus.Counter
	// recoveryRead counts the bytes of log and recovery files read to
	// bring tablets back, by how: "log_split" (log files a split task
	// read), "log_replay" (log files a tablet load replayed from its log
	// positions) and "recovery_file" (recovery files a load replayed). A
	// dead log read once in total shows as log_split ≈ its size and
	// log_replay ≈ 0.
	recoveryRead *prometheus.CounterVec
}

// Kinds of bighive_recovery_read_bytes_total.
const (
	readLogSplit     = "log_split"
	readLogReplay    = "log_replay"
	readRecoveryFile = "recovery_file"
)

// onRecoveryRead counts n bytes read to recover tablets.
func (m *metrics) onRecoveryRead(kind string, n int64) {
	m.recoveryRead.WithLabelValues(kind).Add(float64(n))
}

// secondsBuckets spans 1 ms to about 10 min.
var secondsBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 15)

func newMetrics(s *Server, reg *prometheus.Registry) *metrics {
	m := &metrics{
		reg: reg,
		throttled: prometheus.NewCounter(prometheus.CounterOpts{Name: "bighive_tserver_throttled_writes_total",
			Help: "Writes held back because the write buffers were over their hard limit."}),
		heartbeat: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bighive_tserver_heartbeat_duration_seconds",
			Help: "Round trip of a heartbeat to the master, answered or not.", Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12)}),
		recoveries: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bighive_tserver_recovery_duration_seconds",
			Help: "Tablet loads that succeeded (log and recovery file replay up to serving), by duration.", Buckets: secondsBuckets}),
		recoveryFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "bighive_tserver_recovery_failures_total",
			Help: "Tablet loads that failed."}),
		logSplits: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bighive_tserver_log_split_duration_seconds",
			Help: "Log split tasks (recovering a dead tserver's log) done here, by duration.", Buckets: secondsBuckets}),
		splits: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bighive_tserver_split_duration_seconds",
			Help: "Tablet splits that succeeded, by duration.", Buckets: secondsBuckets}),
		splitFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "bighive_tserver_split_failures_total",
			Help: "Tablet splits that failed or whose outcome is unknown."}),
		checkpoints: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bighive_checkpoint_duration_seconds",
			Help: "Committed checkpoints, by duration (all seven steps).", Buckets: secondsBuckets}),
		flushedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "bighive_checkpoint_flushed_bytes_total",
			Help: "Bytes of TSFiles written by checkpoints (write buffers in, these bytes out)."}),
		compactions: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bighive_compaction_duration_seconds",
			Help: "Committed compactions, by kind (merge or major) and duration.", Buckets: secondsBuckets}, []string{"kind"}),
		compactIn: prometheus.NewCounter(prometheus.CounterOpts{Name: "bighive_compaction_read_bytes_total",
			Help: "Bytes of the TSFiles committed compactions read."}),
		compactOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "bighive_compaction_written_bytes_total",
			Help: "Bytes of the TSFiles committed compactions wrote."}),
		recoveryRead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bighive_recovery_read_bytes_total",
			Help: "Bytes of files read to recover tablets, by kind: log_split (log files read by log split tasks), log_replay (log files replayed by tablet loads), recovery_file (recovery files replayed by tablet loads)."}, []string{"kind"}),
	}
	for _, k := range []string{readLogSplit, readLogReplay, readRecoveryFile} {
		m.recoveryRead.WithLabelValues(k) // exported at 0 before the first recovery
	}
	reg.MustRegister(m.throttled, m.heartbeat, m.recoveries, m.recoveryFailed, m.logSplits, m.splits, m.splitFailed,
		m.checkpoints, m.flushedBytes, m.compactions, m.compactIn, m.compactOut, m.recoveryRead, &collector{s: s})
	return m
}

func (m *metrics) onCheckpoint(res checkpoint.Result, took time.Duration) {
	m.checkpoints.Observe(took.Seconds())
	m.flushedBytes.Add(float64(res.FlushedBytes))
}

func (m *metrics) onCompaction(major bool, in, out int64, took time.Duration) {
	kind := "merge"
	if major {
		kind = "major"
	}
	m.compactions.WithLabelValues(kind).Observe(took.Seconds())
	m.compactIn.Add(float64(in))
	m.compactOut.Add(float64(out))
}

func since(h prometheus.Observer, began time.Time) { h.Observe(time.Since(began).Seconds()) }

// collector reads the parts' stats at scrape time.
type collector struct{ s *Server }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	dWALAppends  = desc("bighive_wal_appends_total", "Records made durable in the write-ahead log.")
	dWALBytes    = desc("bighive_wal_written_bytes_total", "Bytes written to the write-ahead log (records and file headers).")
	dWALGroup    = desc("bighive_wal_group_size_records", "Group-commit batches by their number of records.")
	dWALSync     = desc("bighive_wal_fdatasync_duration_seconds", "fdatasync calls of the write-ahead log by latency.")
	dWALSyncMax  = desc("bighive_wal_fdatasync_max_seconds", "The longest fdatasync of the write-ahead log since open.")
	dWALRolls    = desc("bighive_wal_rolls_total", "Log rolls: files started after the first one of this process.")
	dWALFiles    = desc("bighive_wal_files_started_total", "Log files started (the first one and one per roll).")
	dWALDeleted  = desc("bighive_wal_deleted_files_total", "Log files deleted by log garbage collection.")
	dBufBytes    = desc("bighive_tserver_write_buffer_bytes", "Bytes held by the write buffers (memstores) of every tablet.")
	dCkpt        = desc("bighive_checkpoint_runs_total", "Checkpoints whose metadata commit succeeded.")
	dCkptFailed  = desc("bighive_checkpoint_failures_total", "Checkpoint steps that failed, by step (flush or commit).", "step")
	dCkptTablets = desc("bighive_checkpoint_flushed_tablets_total", "Write buffers flushed to TSFiles by checkpoints.")
	dCkptWindow  = desc("bighive_checkpoint_lock_window_seconds", "How long a checkpoint held writes back (the exclusive state lock, steps 2-5), over the last 4096 checkpoints, by quantile (1: the maximum).", "quantile")
	dThrottleMax = desc("bighive_tserver_throttle_max_seconds", "The longest a write waited for the write buffers to drop below their hard limit, since start.")
	dFilesMax    = desc("bighive_tserver_tablet_tsfiles_max", "The most TSFiles a tablet served here has (read amplification; the backlog rule keeps it bounded).")
	dBacklogComp = desc("bighive_compaction_backlog_total", "Compactions run in backlog mode: for a tablet past --compaction-backlog-files, without the duty rest.")
	dSlowWrites  = desc("bighive_tserver_write_slowdown_total", "Writes delayed because their tablet had more TSFiles than --compaction-stop-files.")
	dSlowSecs    = desc("bighive_tserver_write_slowdown_seconds_total", "Time writes spent delayed by --compaction-stop-files.")
	dSlowMax     = desc("bighive_tserver_write_slowdown_max_seconds", "The longest one write was delayed by --compaction-stop-files, since start (at most --compaction-max-write-delay).")
	dGarbageMaj  = desc("bighive_compaction_garbage_majors_total", "Major compactions started because a tablet's estimated garbage (tombstones, covered, expired and dropped-family cells) exceeded --compaction-garbage-share.")
	dCompact     = desc("bighive_compaction_runs_total", "Committed compactions, by kind (merge or major).", "kind")
	dDeleted     = desc("bighive_checkpoint_deleted_blocks_total", "Blocks of replaced TSFiles deleted, by cause (replaced or orphan).", "cause")
	dCacheHits   = desc("bighive_blockcache_hits_total", "Block cache lookups that hit.")
	dCacheMiss   = desc("bighive_blockcache_misses_total", "Block cache lookups that missed.")
	dCacheIns    = desc("bighive_blockcache_inserts_total", "Pages inserted into the block cache.")
	dCacheEvict  = desc("bighive_blockcache_evictions_total", "Pages evicted from the block cache, by the page's priority.", "priority")
	dCacheBytes  = desc("bighive_blockcache_bytes", "Bytes charged to the block cache, by priority.", "priority")
	dCacheCap    = desc("bighive_blockcache_capacity_bytes", "The block cache's capacity.")
	dCacheEnt    = desc("bighive_blockcache_entries", "Pages in the block cache.")
	dBSCont      = desc("bighive_blockstore_containers", "Log block containers of this tserver's block store.")
	dBSLive      = desc("bighive_blockstore_live_bytes", "Bytes of live (committed, undeleted) blocks.")
	dBSDead      = desc("bighive_blockstore_dead_bytes", "Container data file span not held by live blocks: deleted blocks, punched or not, aborted ranges, padding.")
	dBSPunch     = desc("bighive_blockstore_hole_punches_total", "Hole punches freeing the space of deleted blocks.")
	dBSFiles     = desc("bighive_blockstore_open_files", "File descriptors the block store's file cache holds open.")
	dBSReopen    = desc("bighive_blockstore_file_reopens_total", "Files the file cache reopened after closing them to stay within its capacity.")
	dTablets     = desc("bighive_tserver_tablets", "Tablets held here, by state (serving or loading).", "state")
	dLease       = desc("bighive_tserver_lease_valid", "1 while this tserver holds a valid lease from the master.")
	dLeaseLeft   = desc("bighive_tserver_lease_remaining_seconds", "Time left on the lease (negative once run out).")
)

var priorityNames = [3]string{"low", "medium", "high"} // blockcache classes in index order

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dWALAppends, dWALBytes, dWALGroup, dWALSync, dWALSyncMax, dWALRolls, dWALFiles, dWALDeleted,
		dBufBytes, dCkpt, dCkptFailed, dCkptTablets, dCkptWindow, dCompact, dGarbageMaj, dThrottleMax, dDeleted,
		dFilesMax, dBacklogComp, dSlowWrites, dSlowSecs, dSlowMax,
		dCacheHits, dCacheMiss, dCacheIns, dCacheEvict, dCacheBytes, dCacheCap, dCacheEnt,
		dBSCont, dBSLive, dBSDead, dBSPunch, dBSFiles, dBSReopen, dTablets, dLease, dLeaseLeft, dWALRecycled, dWALZeroed, dWALWaits, dWALWaitsExpired} {
		ch <- d
	}
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// walHistogram turns a wal.Histogram (bucket i: values in (2^(i-1), 2^i],
// the last one everything larger) into a Prometheus histogram whose
// bounds are 2^i × unit.
func walHistogram(d *prometheus.Desc, h wal.Histogram, sum, unit float64) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h)-1)
	var cum uint64
	for i := 0; i < len(h)-1; i++ {
		cum += h[i]
		buckets[float64(uint64(1)<<i)*unit] = cum
	}
	return prometheus.MustNewConstHistogram(d, cum+h[len(h)-1], sum, buckets)
}

// walRecycleStats splits the log files started into those made from a
// kept retired file (recycled) and the new ones, which the log zero-fills
// before use (zeroed).
func walRecycleStats(s wal.Stats) (recycled, zeroed uint64, ok bool) {
	return s.Recycled, s.Files - s.Recycled, true
}

var (
	dWALRecycled = desc("bighive_wal_recycled_files_total", "Log files recycled instead of created.")
	dWALZeroed   = desc("bighive_wal_zeroed_files_total", "Log files zeroed ahead of use.")
	dWALWaits    = desc("bighive_wal_cohort_waits_total",
		"Times the log's flusher waited for the appenders of its last group commit to come back before writing the next.")
	dWALWaitsExpired = desc("bighive_wal_cohort_waits_expired_total", "Of those waits, the ones that ended before half of them were back.")
)

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	ws := s.wal.Stats()
	counter(ch, dWALAppends, float64(ws.Records))
	counter(ch, dWALBytes, float64(ws.Bytes))
	ch <- walHistogram(dWALGroup, ws.BatchRecords, float64(ws.Records), 1)
	ch <- walHistogram(dWALSync, ws.SyncMicros, ws.SyncTime.Seconds(), 1e-6)
	gauge(ch, dWALSyncMax, ws.SyncMax.Seconds())
	counter(ch, dWALFiles, float64(ws.Files))
	counter(ch, dWALRolls, float64(max(ws.Files, 1)-1))
	if recycled, zeroed, ok := walRecycleStats(ws); ok {
		counter(ch, dWALRecycled, float64(recycled))
		counter(ch, dWALZeroed, float64(zeroed))
	}
	counter(ch, dWALWaits, float64(ws.CohortWaits))
	counter(ch, dWALWaitsExpired, float64(ws.CohortExpired))

	gauge(ch, dBufBytes, float64(s.eng.coord.MemoryUsage()))
	cs := s.eng.coord.Stats()
	counter(ch, dWALDeleted, float64(cs.DeletedLogFiles))
	counter(ch, dCkpt, float64(cs.Checkpoints))
	counter(ch, dCkptFailed, float64(cs.FailedFlushes), "flush")
	counter(ch, dCkptFailed, float64(cs.FailedCommits), "commit")
	counter(ch, dCkptTablets, float64(cs.FlushedTablets))
	p50, p99, mx := s.eng.coord.LockWindows()
	gauge(ch, dCkptWindow, p50.Seconds(), "0.5")
	gauge(ch, dCkptWindow, p99.Seconds(), "0.99")
	gauge(ch, dCkptWindow, mx.Seconds(), "1")
	counter(ch, dCompact, float64(cs.Compactions-cs.MajorCompacts), "merge")
	counter(ch, dCompact, float64(cs.MajorCompacts), "major")
	counter(ch, dGarbageMaj, float64(cs.GarbageMajors))
	gauge(ch, dThrottleMax, cs.MaxThrottle.Seconds())
	gauge(ch, dFilesMax, float64(s.eng.coord.FilesPerTablet()))
	counter(ch, dBacklogComp, float64(cs.BacklogCompactions))
	counter(ch, dSlowWrites, float64(cs.SlowedWrites))
	counter(ch, dSlowSecs, cs.SlowdownTime.Seconds())
	gauge(ch, dSlowMax, cs.MaxSlowdown.Seconds())
	counter(ch, dDeleted, float64(cs.DeletedBlocks), "replaced")
	counter(ch, dDeleted, float64(cs.DeletedOrphans), "orphan")

	bc := s.cache.Stats()
	counter(ch, dCacheHits, float64(bc.Hits))
	counter(ch, dCacheMiss, float64(bc.Misses))
	counter(ch, dCacheIns, float64(bc.Inserts))
	for i, name := range priorityNames {
		counter(ch, dCacheEvict, float64(bc.EvictionsByPriority[i]), name)
		gauge(ch, dCacheBytes, float64(bc.ByPriority[i]), name)
	}
	gauge(ch, dCacheCap, float64(bc.Capacity))
	gauge(ch, dCacheEnt, float64(bc.Entries))

	if bs, ok := s.blocks.(interface{ Stats() blockstore.Stats }); ok {
		st := bs.Stats()
		gauge(ch, dBSCont, float64(st.Containers))
		gauge(ch, dBSLive, float64(st.LiveBytes))
		gauge(ch, dBSDead, float64(st.DeadBytes))
		counter(ch, dBSPunch, float64(st.HolePunches))
		gauge(ch, dBSFiles, float64(st.OpenFiles))
		counter(ch, dBSReopen, float64(st.FileReopens))
	}

	var serving, loading int
	for _, r := range s.tablets.all() {
		if r.Serving() {
			serving++
		} else {
			loading++
		}
	}
	gauge(ch, dTablets, float64(serving), "serving")
	gauge(ch, dTablets, float64(loading), "loading")
	now := time.Now()
	valid := 0.0
	if s.leaseValid() {
		valid = 1
	}
	gauge(ch, dLease, valid)
	gauge(ch, dLeaseLeft, s.lease.Remaining(now).Seconds())
}
