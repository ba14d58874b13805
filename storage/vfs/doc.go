// Package vfs is the filesystem seam of Bighive's storage code.
//
// Every file operation of blockstore, wal and checkpoint goes through an FS,
// so tests can inject errors and simulate crashes (see vfstest). The OS
// implementation, Default, calls the kernel directly; it adds nothing.
//
// Durability contract (POSIX, as the storage packages rely on it):
//   - data written to a File is durable only after File.Sync or File.Datasync
//     returned nil;
//   - a created, renamed or removed directory entry is durable only after
//     SyncDir of its parent directory returned nil.
//
// WriteFileAtomic is the one helper for write-temp → fsync → rename → fsync
// dir; storage code never open-codes that sequence.
package vfs
