// Package bench is the load generator behind `bighive bench`: the
// benchmark of issue 9, run through the public client library against a
// real cluster (normally one master and one tserver on this machine).
//
// A run is a sequence of fixed-time phases over one table of Keys rows
// (row key = the row's index as 16 decimal digits, one family "cf", one
// column "cf:v", values of ValueSize random bytes, MaxVersions 1):
//
//	put       Concurrency goroutines, each a durable Put of a random row
//	bulk      ApplyBulk of BatchSize rows (a permutation of the keyspace, so
//	          batches span tablets); afterwards, untimed, until every row
//	          of the keyspace has been written once (reads need them)
//	          — then CheckpointAll, so reads find the data in TSFiles —
//	get-warm  random Gets over a contiguous hot range that fits in half the
//	          block cache, after one read pass over it
//	get-cold  random Gets over the whole keyspace, whose TSFiles are several
//	          times the block cache: most Gets miss the block cache (the
//	          OS page cache is not dropped; that needs root and would hurt
//	          the other users of the machine)
//	scan      full scans by one scanner, then by Scanners scanners over
//	          disjoint ranges, repeated until the phase time is up
//	increment ReadModifyWrite +1 of a random one of Counters counter rows
//	          (row key = a data row's key + "#c", column "cf:n"); afterwards
//	          the counters must sum to the acknowledged increments
//	checkandmutate
//	          one CheckAndMutate per call on a random one of the same rows,
//	          compare-and-set locking of column "cf:owner": a goroutine
//	          releases the one lock it holds (owner is me → free; it must
//	          match) or tries to take a random one (owner is a goroutine →
//	          nothing; else owner = me)
//
// Every phase checks what it reads (row present, value size) and stops at
// the first error: a benchmark that returned errors measures nothing.
// Latencies are per call (a Put, a Get, an ApplyBulk of a batch, an
// increment, a conditional mutation); a scan
// reports throughput only. MB/s counts row key + qualifier + value bytes.
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
