// Package e2e holds Bighive's multi-process tests: real master and tserver
// processes started by the cluster harness (testkit/cluster) on loopback, driven
// through the client library, killed with real signals. Each test asserts
// that every acknowledged write reads back — invariants 1, 4, 6 and 8 of
// docs/design.md (durable before acknowledged, idempotent replay, one
// server per tablet, clear statuses for bad input) seen from outside. The
// backup kill test also runs the orphan passes after its crashes and
// restores every backup: invariant 9 ('nothing named is deleted') for the
// blocks backups and restored tables share.
package e2e
