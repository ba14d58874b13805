// Package bench is the load generator behind `bighive bench`, run
// through the public client library against a real cluster (normally one
// master and one tserver on this machine).
//
// A run is a sequence of fixed-time phases over one table of Keys rows
// (row key = the row's index as 16 decimal digits, one family "cf", one
// column "cf:v", MaxVersions 1). Row i's value is ValueSize random bytes
// of its own: a slice of a 4 MiB random pool generated once from the
// seed, at an offset given by a hash of i. Every write of row i writes
// the same value; neighbouring rows' values are unrelated, so the
// table's compressed TSFile pages are as large as its data (with the
// default 500 000 rows of 1000 B, about 0.5 GB, several times the block
// cache), and a write costs the client no allocation or random
// generation. The write, read and scan phases are named after
// HBase's PerformanceEvaluation; ycsbA … ycsbF are YCSB's core workloads:
//
//	ping      the floor: a no-op RPC per call at the same concurrency over
//	          the same connections (the tserver's Ping RPC to the server
//	          of a random row; through the Bigtable API, PingAndWarm, which
//	          the frontend answers itself); after an untimed warm-up. It
//	          always runs, first
//	sequentialWrite
//	          durable Puts, call i writing row i (mod Keys)
//	randomWrite
//	          durable Puts of random rows
//	bulk      ApplyBulk of BatchSize rows (a permutation of the keyspace, so
//	          batches span tablets); afterwards, untimed, until every row
//	          of the keyspace has been written once (reads need them)
//	          — then CheckpointAll, so reads find the data in TSFiles —
//	sequentialRead
//	          Gets, call i reading row i (mod Keys)
//	randomReadWarm
//	          random Gets over a contiguous hot range that fits in half the
//	          block cache, after one read pass over it
//	randomRead
//	          random Gets over the whole keyspace, whose TSFiles are several
//	          times the block cache: most Gets miss the block cache (the
//	          OS page cache is not dropped; that needs root and would hurt
//	          the other users of the machine)
//	scan      full scans by one scanner, then (scan-N) by Scanners scanners
//	          over disjoint ranges, repeated until the phase time is up
//	scanRange10, scanRange100, scanRange1000
//	          scans of 10, 100, 1000 rows from a random row
//	ycsbA … ycsbF
//	          YCSB's core workloads over the loaded rows (one record per
//	          row, one field): A 50 % read / 50 % update, B 95/5, C read
//	          only, D 95 % read of the latest rows / 5 % insert, E 95 %
//	          scans of 1–100 rows / 5 % insert, F 50 % read / 50 %
//	          read-modify-write (a Get, then a Put of the row). Keys follow
//	          Distribution: YCSB's scrambled Zipfian (θ = 0.99, Gray et
//	          al.'s generator, the rank hashed with FNV-1a over the rows)
//	          or uniform; D reads the latest rows (Zipfian over recency)
//	          whatever Distribution says. Inserts append rows after the
//	          last, and reads and scans only choose rows below the first
//	          insert not yet acknowledged. Rows count operations (a scan is
//	          one), so rows/s is YCSB's operations/s
//	increment ReadModifyWrite +1 of a random one of Counters counter rows
//	          (row key = a data row's key + "#c", column "cf:n"); afterwards
//	          the counters must sum to the acknowledged increments
//	checkAndMutate
//	          one CheckAndMutate per call on a random one of the same rows,
//	          compare-and-set locking of column "cf:owner": a goroutine
//	          releases the one lock it holds (owner is me → free; it must
//	          match) or tries to take a random one (owner is a goroutine →
//	          nothing; else owner = me)
//
// Options.Phases selects phases by name or by a group of PhaseAliases
// (put, get, get-warm and get-cold are the earlier names of randomWrite,
// randomReadWarm + randomRead, randomReadWarm and randomRead).
//
// Every phase checks what it reads (a Get: the row present with one
// cell, of ValueSize bytes, that are the row's own value, so a read of
// the wrong row fails unless the two rows' pool offsets happen to be
// equal, about one chance in 4 million; a scan: exactly its rows, in
// order, one cell each) and stops at the first error:
// a benchmark that returned errors measures nothing. Each phase reports
// its rows/s, MB/s (row key + qualifier + value bytes), its ratio to the
// floor and the latencies of one
// call: p50, p90, p99, p99.9 and max, exact order statistics of every
// call (every latency is kept and sorted; no histogram buckets). The YCSB
// phases also report each kind of operation's count and latencies.
//
// The floor ratio is the phase's rows/s over the pings/s of a short ping
// probe (Options.FloorProbe, by default a fifth of the phase time, at most
// 2 s) run just before the phase at the same concurrency: the floor of the
// same run and of the same moment's machine load, so that figures from
// machines of different or changing load can be compared. With probes
// off every phase's ratio is to the ping phase at the start.
// While a phase runs, Options.Progress gets a rate line every second.
//
// Each phase also reports what it cost in CPU, process by process: the
// user + system time of the client (this process, from getrusage) and of
// each server process (utime + stime of /proc/<pid>/stat, in clock ticks
// of 1/AT_CLKTCK s, read from the auxiliary vector: 10 ms on Linux), read
// just before the phase's first call and just after its last, so that
// warm-ups, floor probes and the untimed fill are outside. Each is
// divided by the phase's rows, the unit of its rows/s (a Put, a Get, a
// ping, a YCSB operation; each row of a bulk batch or of a scan): µs per
// operation, so that µs/op × rows/s is the cores the process kept busy;
// Result.CPU keeps the CPU time itself too, to divide by calls or bytes.
// Beside them, the cores busy: the measured processes' CPU time over the
// wall time, of runtime.NumCPU, and the whole machine's (/proc/stat's
// busy time, whoever used it; the difference is the machine's other
// load). The server processes are those of this machine listening on the
// masters' (Options.Masters), the live tservers' and the frontend's
// (BigtableAddr) addresses, found through /proc/net/tcp{,6} and the
// sockets among /proc/<pid>/fd, or those Options.Procs names (bench
// --pids). A server on another machine, or in this process (an
// in-process cluster, whose CPU time is then in the client's), is listed
// in Report.Unmeasured. Work a phase leaves behind (a checkpoint or a
// compaction still running) counts in the next phase's figures.
//
// The data calls go through Options.API: Bighive's client (APINative) or
// the official Cloud Bigtable Go client through a frontend serving the
// Bigtable API (APIBigtable), behind one small interface (store), so the
// phases are the same code for both. Creating, checkpointing and dropping
// the table use the native client either way.
//
// The figures depend on the machine's other load; each Result carries the
// 1-minute load average at the end of its phase.
//
// There is no on-disk format: the package keeps no state of its own.
package bench
