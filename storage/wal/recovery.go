package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"bighive/storage/vfs"
)

// Recovery files: a dead tserver's log split by tablet (docs/design.md 'Log
// splitting'), so that recovering b tablets reads the log once instead of
// once per tablet (m × b bytes for a log of m bytes). A splitter reads
// every log file of a SplitRange once and writes one recovery file per
// tablet with that tablet's records; the tablet's next owner replays only
// its own recovery files.
//
//	<root>/recovery/<prefix>/<from>-<until>/<tablet-id>.log
//
// from and until are 20-digit file timestamps: the range holds the log
// files of prefix with from <= FileTS < until (until = MaxInt64: no bound).
//
// A recovery file is written whole to a temporary file, fsynced, renamed to
// its name and its directory fsynced (WriteRecoveryFiles), so it exists
// complete or not at all; any damage is corruption, never a torn tail.
// Format (version 1, little-endian; must not change without a new
// version):
//
//	header:  magic "BHIVEREC" | version u16 = 1 | plen u16 | from i64 | until i64 | prefix | crc u32
//	records: frames as in a version-1 log file (length u32 | crc u32 | payload),
//	         sequence numbers strictly increasing (not contiguous)
//	footer:  8 zero bytes | record count u64 | crc u32 (of the 16 bytes before it)
//
// The header crc covers every header byte before it. The file ends right
// after the footer.

const (
	recoveryMagic     = "BHIVEREC"
	recoveryVersion   = 1
	recoveryDir       = "recovery"
	recoveryHeaderFix = 28 // magic, version, prefix length, from, until
	recoveryFooterLen = 20
	splitTaskPrefix   = "split/"
	deleteTaskPrefix  = "delete/"
)

// SplitRange is the set of log files of Prefix with From <= FileTS <
// Until. Until == math.MaxInt64 leaves it unbounded.
type SplitRange struct {
	Prefix      string
	From, Until int64
}

// Unbounded is the Until of a range without an end.
const Unbounded = math.MaxInt64

// Contains reports whether the log file at ts lies in r.
func (r SplitRange) Contains(ts int64) bool { return ts >= r.From && ts < r.Until }

func (r SplitRange) String() string {
	return fmt.Sprintf("%s/%0*d-%0*d", r.Prefix, tsDigits, r.From, tsDigits, r.Until)
}

// Dir is the directory of the range's recovery files, relative to the root.
func (r SplitRange) Dir() string { return filepath.Join(recoveryDir, r.String()) }

// RecoveryFile is the path, relative to the root, of tablet's recovery
// file of r.
func (r SplitRange) RecoveryFile(tablet string) string {
	return filepath.Join(r.Dir(), tablet+logSuffix)
}

// ParseSplitRange parses what SplitRange.String formats.
func ParseSplitRange(s string) (SplitRange, error) {
	prefix, span, ok := strings.Cut(s, "/")
	from, until, ok2 := strings.Cut(span, "-")
	if !ok || !ok2 || len(from) != tsDigits || len(until) != tsDigits {
		return SplitRange{}, fmt.Errorf("%w: %q is not a split range", ErrBadName, s)
	}
	if _, err := ParsePrefix(prefix); err != nil {
		return SplitRange{}, err
	}
	f, err1 := strconv.ParseInt(from, 10, 64)
	u, err2 := strconv.ParseInt(until, 10, 64)
	if err1 != nil || err2 != nil || f < 0 || u <= f {
		return SplitRange{}, fmt.Errorf("%w: %q is not a split range", ErrBadName, s)
	}
	r := SplitRange{Prefix: prefix, From: f, Until: u}
	if r.String() != s {
		return SplitRange{}, fmt.Errorf("%w: split range %q is not canonical", ErrBadName, s)
	}
	return r, nil
}

// Task ids of the master's log-split protocol (bighivepb.LogSplitTask):
// "split/<range>" asks a tserver to split the range's files for the task's
// tablets; "delete/<recovery file>" asks it to delete a recovery file no
// tablet names any more. One format/parse pair, here, because the names in
// them are this package's.

// SplitTaskID is the task id of splitting r.
func SplitTaskID(r SplitRange) string { return splitTaskPrefix + r.String() }

// DeleteTaskID is the task id of deleting the recovery file at path
// (relative to the root).
func DeleteTaskID(path string) string { return deleteTaskPrefix + path }

// ParseTaskID returns the range of a split task, or the path of a delete
// task (exactly one is set).
func ParseTaskID(id string) (split *SplitRange, deletePath string, err error) {
	if s, ok := strings.CutPrefix(id, splitTaskPrefix); ok {
		r, err := ParseSplitRange(s)
		if err != nil {
			return nil, "", err
		}
		return &r, "", nil
	}
	if p, ok := strings.CutPrefix(id, deleteTaskPrefix); ok {
		if err := validRecoveryPath(p); err != nil {
			return nil, "", err
		}
		return nil, p, nil
	}
	return nil, "", fmt.Errorf("%w: %q is not a log-split task id", ErrBadName, id)
}

// validRecoveryPath accepts only recovery/<range>/<tablet>.log and, for
// split children whose first checkpoint retired them,
// splitlog/<tablet>.log: a delete task never names anything else.
func validRecoveryPath(p string) error {
	dir, name := filepath.Split(p)
	if filepath.Clean(dir) == "splitlog" && strings.HasSuffix(name, logSuffix) && len(name) > len(logSuffix) &&
		!strings.ContainsAny(name, "/\x00") && filepath.Clean(p) == p {
		return nil
	}
	rest, ok := strings.CutPrefix(filepath.Clean(dir), recoveryDir+"/")
	if !ok || !strings.HasSuffix(name, logSuffix) || len(name) == len(logSuffix) || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%w: %q is not a recovery file", ErrBadName, p)
	}
	if _, err := ParseSplitRange(rest); err != nil {
		return fmt.Errorf("%w: %q is not a recovery file", ErrBadName, p)
	}
	return nil
}

// EncodeRecoveryFile returns the bytes of the recovery file of r holding
// recs (all of one tablet, in sequence order).
func EncodeRecoveryFile(r SplitRange, recs []*Record) ([]byte, error) {
	if len(r.Prefix) == 0 || len(r.Prefix) > maxPrefixLen {
		return nil, fmt.Errorf("%w: prefix length %d", ErrBadName, len(r.Prefix))
	}
	buf := make([]byte, 0, recoveryHeaderFix+len(r.Prefix)+4+recoveryFooterLen)
	buf = append(buf, recoveryMagic...)
	buf = binary.LittleEndian.AppendUint16(buf, recoveryVersion)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(r.Prefix)))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(r.From))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Until))
	buf = append(buf, r.Prefix...)
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
	var last uint64
	for i, rec := range recs {
		if i > 0 && rec.Seq <= last {
			return nil, fmt.Errorf("%w: recovery records out of order: seq %d after %d", ErrBadRecord, rec.Seq, last)
		}
		last = rec.Seq
		buf = appendRecord(buf, framesV1, rec.Seq, rec.Timestamp, rec.TabletID, &rec.Mutation)
	}
	foot := make([]byte, 16, recoveryFooterLen)
	binary.LittleEndian.PutUint64(foot[8:], uint64(len(recs)))
	foot = binary.LittleEndian.AppendUint32(foot, crc32.Checksum(foot, castagnoli))
	return append(buf, foot...), nil
}

// recoveryWriters bounds the recovery files WriteRecoveryFiles writes at
// once. Issue 21: a split for 10 000 tablets started 10 000 goroutines,
// each blocked in create, fsync and rename, so the process held thousands
// of OS threads in the kernel (the machine's load average went past 300)
// for no gain: on ext4 here 10 000 files took 3.5 s with 10 000 writers
// and 3.3 s with 64 (concurrent fsyncs share journal commits either way).
const recoveryWriters = 64

// WriteRecoveryFiles writes the recovery file of r of every tablet of
// recs (recoveryWriters at a time) and returns each one's path relative to root and
// their total size. When it returns nil every file and every directory up
// to root/recovery are durable: each file is fsynced before its rename,
// and the range directory once after all renames.
func WriteRecoveryFiles(fsys vfs.FS, root string, r SplitRange, recs map[string][]*Record) (map[string]string, int64, error) {
	dir := filepath.Join(root, r.Dir())
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, fmt.Errorf("wal: recovery dir %s: %w", dir, err)
	}
	// The new directories' entries: range dir in the prefix dir, prefix dir
	// in recovery/, recovery/ in the root.
	for d := dir; d != filepath.Clean(root) && d != filepath.Dir(d); d = filepath.Dir(d) {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return nil, 0, fmt.Errorf("wal: sync dir %s: %w", filepath.Dir(d), err)
		}
	}
	type result struct {
		tablet, rel string
		size        int64
		err         error
	}
	results := make(chan result, len(recs))
	work := make(chan string)
	for range min(recoveryWriters, len(recs)) {
		go func() {
			for tablet := range work {
				rel := r.RecoveryFile(tablet)
				size, err := writeSynced(fsys, filepath.Join(root, rel), r, recs[tablet])
				results <- result{tablet, rel, size, err}
			}
		}()
	}
	go func() {
		for tablet := range recs {
			work <- tablet
		}
		close(work)
	}()
	out := make(map[string]string, len(recs))
	var total int64
	var errs []error
	for range recs {
		res := <-results
		if res.err != nil {
			errs = append(errs, res.err)
			continue
		}
		out[res.tablet] = res.rel
		total += res.size
	}
	if len(errs) > 0 {
		return nil, 0, errors.Join(errs...)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return nil, 0, fmt.Errorf("wal: sync dir %s: %w", dir, err)
	}
	return out, total, nil
}

// writeSynced writes the recovery file at path through a temporary file,
// fsynced, then renamed (the caller syncs the directory).
func writeSynced(fsys vfs.FS, path string, r SplitRange, recs []*Record) (int64, error) {
	data, err := EncodeRecoveryFile(r, recs)
	if err != nil {
		return 0, err
	}
	tmp := path + vfs.TempSuffix
	f, err := fsys.Create(tmp)
	if err != nil {
		return 0, fmt.Errorf("wal: create %s: %w", tmp, err)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		fsys.Remove(tmp)
		return 0, fmt.Errorf("wal: write recovery file %s: %w", path, err)
	}
	return int64(len(data)), nil
}

// ReplayRecoveryFile reads the recovery file at path (relative to root)
// and calls fn for each record. Any damage is a *CorruptionError naming the
// file and offset. It returns the file's size.
func ReplayRecoveryFile(fsys vfs.FS, root, path string, fn func(*Record) error) (int64, error) {
	full := filepath.Join(root, path)
	data, err := vfs.ReadFile(fsys, full)
	if err != nil {
		return 0, fmt.Errorf("wal: read recovery file %s: %w", full, err)
	}
	return int64(len(data)), scanRecoveryFile(full, data, fn)
}

func scanRecoveryFile(path string, data []byte, fn func(*Record) error) error {
	corrupt := func(off int, format string, args ...any) error {
		return &CorruptionError{File: path, Offset: int64(off), Err: fmt.Errorf(format, args...)}
	}
	if len(data) < recoveryHeaderFix+4 || string(data[:len(recoveryMagic)]) != recoveryMagic {
		return corrupt(0, "%w: not a recovery file", ErrBadHeader)
	}
	if v := binary.LittleEndian.Uint16(data[8:]); v != recoveryVersion {
		return corrupt(0, "%w: recovery file version %d, want %d", ErrBadHeader, v, recoveryVersion)
	}
	n := int(binary.LittleEndian.Uint16(data[10:]))
	hlen := recoveryHeaderFix + n + 4
	if n == 0 || n > maxPrefixLen || len(data) < hlen {
		return corrupt(0, "%w: prefix length %d", ErrBadHeader, n)
	}
	if got, want := crc32.Checksum(data[:hlen-4], castagnoli), binary.LittleEndian.Uint32(data[hlen-4:]); got != want {
		return corrupt(0, "%w: %w: header %08x, want %08x", ErrBadHeader, ErrChecksum, got, want)
	}
	from := int64(binary.LittleEndian.Uint64(data[12:]))
	pos := Position{Prefix: string(data[recoveryHeaderFix : recoveryHeaderFix+n]), FileTS: from}
	off := hlen
	var count uint64
	var last uint64
	for {
		payload, st, err := readFrame(data[off:], framesV1)
		switch st {
		case frameOK:
			rec := Record{File: pos, Offset: int64(off)}
			if err := decodePayload(payload, &rec); err != nil {
				return corrupt(off, "%w", err)
			}
			if count > 0 && rec.Seq <= last {
				return corrupt(off, "%w: seq %d after %d", ErrBadRecord, rec.Seq, last)
			}
			last = rec.Seq
			count++
			if err := fn(&rec); err != nil {
				return err
			}
			off += frameHeaderLenV1 + len(payload)
			continue
		case frameEnd:
			if len(data)-off != recoveryFooterLen {
				return corrupt(off, "%w: footer at %d, file is %d bytes", ErrBadRecord, off, len(data))
			}
			foot := data[off:]
			if got, want := crc32.Checksum(foot[:16], castagnoli), binary.LittleEndian.Uint32(foot[16:]); got != want {
				return corrupt(off, "%w: footer %08x, want %08x", ErrChecksum, got, want)
			}
			if c := binary.LittleEndian.Uint64(foot[8:]); c != count {
				return corrupt(off, "%w: footer counts %d records, file holds %d", ErrBadRecord, c, count)
			}
			return nil
		case frameShort:
			return corrupt(off, "%w: record cut off (recovery files are written whole)", ErrBadRecord)
		default:
			return corrupt(off, "%w", err)
		}
	}
}

// SplitReport says what SplitLog read.
type SplitReport struct {
	Files     []FileReport // every log file of the range, oldest first
	BytesRead int64        // bytes of those files read (each read once)
	DataBytes int64        // of those, bytes up to the end of the last whole record
	Records   int          // records kept, all tablets
}

// SplitLog reads every log file of r once and returns, per tablet of
// keep, that tablet's records in sequence order (records of other tablets
// are dropped). Torn tails and corruption are handled as in Replay: a torn
// tail is accepted only at the end of the newest file of the prefix that
// has a header (the range's last file, when no later file of the prefix
// has one), within the flush window; sequence numbers must continue from
// file to file; anything else is a *CorruptionError naming the file and
// offset, and SplitLog returns no records with it.
func SplitLog(ctx context.Context, fsys vfs.FS, root string, r SplitRange, keep map[string]bool) (map[string][]*Record, SplitReport, error) {
	var rep SplitReport
	files, err := Files(fsys, root, r.Prefix)
	if err != nil {
		return nil, rep, err
	}
	out := map[string][]*Record{}
	var ch chain
	for i, pos := range files {
		if pos.FileTS < r.From {
			continue
		}
		if pos.FileTS >= r.Until {
			// The range ends before the prefix does: its last file is not
			// the newest, so it may not end torn, and the next file must
			// continue its sequence numbers.
			if err := ch.checkNext(fsys, root, files[i:]); err != nil {
				return nil, rep, err
			}
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, rep, err
		}
		fr, err := ch.replayFile(fsys, FilePath(root, pos), &pos, func(rec *Record) error {
			if keep[rec.TabletID] {
				c := *rec
				out[rec.TabletID] = append(out[rec.TabletID], &c)
				rep.Records++
			}
			return nil
		})
		rep.Files = append(rep.Files, fr)
		rep.BytesRead += fr.Size
		rep.DataBytes += fr.End
		if err != nil {
			return nil, rep, err
		}
	}
	return out, rep, nil
}
