// Package e2e holds Bighive's multi-process tests: real master and tserver
// processes started by the cluster harness (testkit/cluster) on loopback, driven
// through the client library, killed with real signals. Each test asserts
// that every acknowledged write reads back — invariants 1, 4, 6 and 8 of
// docs/design.md (durable before acknowledged, idempotent replay, one
// server per tablet, clear statuses for bad input) seen from outside. The
// backup kill test also runs the orphan passes after its crashes and
// restores every backup: invariant 9 ('nothing named is deleted') for the
// blocks backups and restored tables share. The linearizability tests
// check a history of reads and writes with porcupine, each cell a
// register.
//
// The tests on hosts (TestHosts*) run the processes in network and mount
// namespaces of their own over a GlusterFS volume (testkit/cluster's
// Options.Hosts) and add the faults of a fleet to the suites: the split,
// merge and linearizability tests share their bodies with a local
// variant (splitGrows, mergeEmptied, linearizable take the cluster's
// options), and apply a faultKit's faults — a tserver cut from the
// masters or from its clients, the master leader cut from the other
// masters, a brick of the three-replica volume stopped — one after the
// other while writers run, printing each fault's cost (until every tablet
// takes a write again) and the rows acknowledged and lost. They run two
// at a time after the package's other tests (hostsTest), about three
// minutes together on a loaded 2-core machine; -hosts.long holds each
// fault five times longer and applies the list three times. They need
// root and GlusterFS and skip without them and under -short.
package e2e
