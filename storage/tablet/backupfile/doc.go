// Package backupfile reads and writes an exported backup
// (docs/backup-format.md): a directory holding a manifest (the backup's
// schema and, per tablet, its range and data files) and one data file per
// TSFile, holding that file's entries in records with checksums. It is the
// format `bighive backup export` writes and `import` reads, on any file
// system and by another cluster, so it depends on nothing of the TSFile
// layout: the entries are encoded here, and an import writes them as new
// TSFiles.
//
// # Invariants
//
//   - Every file starts with a magic and a format version; a version other
//     than FormatVersion is refused (ErrVersion), never guessed at.
//   - Every byte read is covered by a checksum before it is decoded, and
//     lengths are bounded before anything is allocated.
//   - Garbage never panics: a bad magic, a torn or short record, a checksum
//     mismatch or an undecodable entry is a *CorruptError naming the file
//     and the offset (ErrCorrupt).
//   - The entries of one data file are in strictly increasing
//     memstore.Compare order (the order a TSFile holds and tsfile.Write
//     needs); EntryIterator checks it.
package backupfile
