package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"bighive/storage/tablet/tsfile"
	"bighive/storage/vfs"
	"bighive/storage/wal"
)

// TabletMeta is what a tablet's metadata records (docs/design.md 'Log
// positions', 'TSFiles and compaction'), as a Metadata implementation stores it.
type TabletMeta struct {
	TabletID     string
	Epoch        int64
	LogPositions []wal.Position
	TSFiles      []tsfile.Info
	// DataDirGroup lists the data directories (UUIDs) of the tablet's group.
	DataDirGroup []string
	// UserData is opaque to this package (table, row range, ...).
	UserData []byte
}

// Replayer is a tablet being rebuilt from the log.
type Replayer interface {
	ID() string
	// Replay applies one logged row mutation to the active write buffer,
	// without logging it again. Applying a record twice is the same as
	// once (invariant 4 in docs/design.md, 'replay is idempotent').
	Replay(rec *wal.Record) error
}

// Progress is reported while recovery replays logs.
type Progress struct {
	Prefix    string // the prefix being replayed
	FilesDone int    // log files read so far, all prefixes
	Files     int    // log files to read, all prefixes
	Records   int    // records applied so far
	Elapsed   time.Duration
}

// RecoveryReport says what a recovery did.
type RecoveryReport struct {
	Tablets  int
	Records  int              // records applied
	Files    []wal.FileReport // every log file read, per prefix oldest first
	Duration time.Duration
}

// Torn reports whether a log file had a torn tail.
func (r *RecoveryReport) Torn() bool {
	for _, f := range r.Files {
		if f.Torn {
			return true
		}
	}
	return false
}

// RecoverTablet replays, for each of positions, that log file and every
// later one of its prefix into t (records of other tablets are skipped).
// The tserver uses it for a tablet it loads; the tablet must not serve
// before it returns nil.
func RecoverTablet(ctx context.Context, t Replayer, positions []wal.Position, fsys vfs.FS, root string) (RecoveryReport, error) {
	return RecoverTablets(ctx, []Replayer{t}, map[string][]wal.Position{t.ID(): positions}, fsys, root, nil)
}

// RecoverTablets replays the logs of many tablets with one read of each
// log file: positions maps a tablet id to its list of log positions. The
// progress callback, if any, is called after each file.
func RecoverTablets(ctx context.Context, tablets []Replayer, positions map[string][]wal.Position, fsys vfs.FS, root string, progress func(Progress)) (RecoveryReport, error) {
	start := time.Now()
	rep := RecoveryReport{Tablets: len(tablets)}
	byID := make(map[string]Replayer, len(tablets))
	// prefix → tablet id → first file timestamp to replay.
	from := map[string]map[string]int64{}
	for _, t := range tablets {
		byID[t.ID()] = t
		for _, p := range positions[t.ID()] {
			m := from[p.Prefix]
			if m == nil {
				m = map[string]int64{}
				from[p.Prefix] = m
			}
			if ts, ok := m[t.ID()]; !ok || p.FileTS < ts {
				m[t.ID()] = p.FileTS
			}
		}
	}
	prefixes := make([]string, 0, len(from))
	for p := range from {
		prefixes = append(prefixes, p)
	}
	slices.Sort(prefixes)
	total := 0
	for _, prefix := range prefixes {
		files, err := wal.Files(fsys, root, prefix)
		if err != nil {
			return rep, fmt.Errorf("checkpoint: recover: %w", err)
		}
		first := int64(-1)
		for _, ts := range from[prefix] {
			if first < 0 || ts < first {
				first = ts
			}
		}
		for _, f := range files {
			if f.FileTS >= first {
				total++
			}
		}
	}
	done := 0
	for _, prefix := range prefixes {
		r, err := wal.ReplayTablets(ctx, fsys, root, prefix, from[prefix], func(rec *wal.Record) error {
			t := byID[rec.TabletID]
			if err := t.Replay(rec); err != nil {
				return fmt.Errorf("checkpoint: replay into tablet %s (%s at offset %d): %w", rec.TabletID, rec.File, rec.Offset, err)
			}
			return nil
		})
		rep.Files = append(rep.Files, r.Files...)
		rep.Records += r.Records
		done += len(r.Files)
		if progress != nil {
			progress(Progress{Prefix: prefix, FilesDone: done, Files: total, Records: rep.Records, Elapsed: time.Since(start)})
		}
		if err != nil {
			rep.Duration = time.Since(start)
			return rep, fmt.Errorf("checkpoint: recover prefix %s: %w", prefix, err)
		}
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

// RecoverOptions configure Recover.
type RecoverOptions struct {
	// FS and Root locate the logs (Root/wal/<prefix>/...).
	FS   vfs.FS
	Root string
	// Tablets are the metadata records of the tablets to recover.
	Tablets []TabletMeta
	// Open opens a tablet over its TSFiles (the engine and the schema are
	// the caller's); the returned tablet receives the replayed records.
	Open func(ctx context.Context, m TabletMeta) (Replayer, error)
	// Progress, if set, is called after each log file.
	Progress func(Progress)
	Logger   *slog.Logger
}

// Recover is the restart recovery of a single-node tserver: it opens each
// tablet over its TSFiles, then replays the WAL from each of its log
// positions into its buffers, reading each log file once. The block store
// must be open (the caller's Open uses it). It returns the tablets in the
// order of opts.Tablets and logs the time it took.
func Recover(ctx context.Context, opts RecoverOptions) ([]Replayer, RecoveryReport, error) {
	start := time.Now()
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	fsys := opts.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	tabs := make([]Replayer, 0, len(opts.Tablets))
	positions := make(map[string][]wal.Position, len(opts.Tablets))
	files := 0
	for _, m := range opts.Tablets {
		t, err := opts.Open(ctx, m)
		if err != nil {
			return nil, RecoveryReport{}, fmt.Errorf("checkpoint: open tablet %s: %w", m.TabletID, err)
		}
		tabs = append(tabs, t)
		positions[m.TabletID] = m.LogPositions
		files += len(m.TSFiles)
	}
	opened := time.Since(start)
	rep, err := RecoverTablets(ctx, tabs, positions, fsys, opts.Root, opts.Progress)
	rep.Duration = time.Since(start)
	if err != nil {
		return nil, rep, err
	}
	lg.Info("recovery done", "tablets", len(tabs), "tsfiles", files, "open", opened,
		"log_files", len(rep.Files), "records", rep.Records, "torn", rep.Torn(), "took", rep.Duration)
	return tabs, rep, nil
}
