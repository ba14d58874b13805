package tserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	pb "bighive/proto/bighivepb"
	rp "bighive/storage/replica"
	"bighive/storage/wal"
)

// Log splitting, the tserver's side (master/logsplit.go plans it): a
// "split/<range>" task reads every log file of the range once and writes
// one recovery file per listed tablet under <root>/recovery/ (durable
// before the report); a "delete/<path>" task removes a recovery file no
// tablet names any more. A tablet whose metadata lists recovery files
// replays them before its log positions.

// runningSplits holds the tasks this process runs, so a task the master
// sends again while it runs is not started twice.
var runningSplits sync.Map // splitKey → struct{}

type splitKey struct {
	s  *Server
	id string
}

// runLogSplitTasks starts the tasks of a heartbeat reply in the background.
func (s *Server) runLogSplitTasks(ctx context.Context, tasks []*pb.LogSplitTask) {
	for _, t := range tasks {
		k := splitKey{s, t.TaskId}
		if _, busy := runningSplits.LoadOrStore(k, struct{}{}); busy {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer runningSplits.Delete(k)
			if err := s.runLogSplitTask(ctx, t); err != nil && ctx.Err() == nil {
				s.log.Warn("log split task failed", "task", t.TaskId, "err", err)
			}
		}()
	}
}

func (s *Server) runLogSplitTask(ctx context.Context, t *pb.LogSplitTask) error {
	split, del, err := wal.ParseTaskID(t.TaskId)
	if err != nil {
		return fmt.Errorf("tserver: log split task: %w", err)
	}
	req := &pb.ReportLogSplitRequest{TaskId: t.TaskId, TserverUuid: s.uuid, RecoveryFiles: map[string]string{}}
	if del != "" {
		if err := s.deleteRecoveryFile(del); err != nil {
			return err
		}
	} else {
		began := time.Now()
		keep := make(map[string]bool, len(t.TabletIds))
		for _, id := range t.TabletIds {
			keep[id] = true
		}
		recs, rep, err := wal.SplitLog(ctx, s.fs, s.opts.Root, *split, keep)
		if err != nil {
			return fmt.Errorf("tserver: split %s: %w", split, err)
		}
		read := time.Since(began)
		files, written, err := wal.WriteRecoveryFiles(s.fs, s.opts.Root, *split, recs)
		if err != nil {
			return fmt.Errorf("tserver: split %s: %w", split, err)
		}
		req.RecoveryFiles = files
		req.BytesRead = rep.BytesRead
		s.metrics.onRecoveryRead(readLogSplit, rep.BytesRead)
		since(s.metrics.logSplits, began)
		s.log.Info("log split task done", "task", t.TaskId, "tablets", len(t.TabletIds), "log_files", len(rep.Files),
			"bytes_read", rep.BytesRead, "log_data_bytes", rep.DataBytes, "records", rep.Records,
			"recovery_files", len(files), "recovery_bytes", written, "read", read, "took", time.Since(began))
	}
	return s.master.Call(ctx, func(ctx context.Context, mc pb.MasterClient) error {
		_, err := mc.ReportLogSplit(ctx, req)
		return err
	})
}

// deleteRecoveryFile removes a recovery file (gone already is fine) and
// its range directory once empty.
func (s *Server) deleteRecoveryFile(rel string) error {
	path := filepath.Join(s.opts.Root, rel)
	if err := s.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tserver: delete recovery file: %w", err)
	}
	dir := filepath.Dir(path)
	if err := s.fs.SyncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tserver: delete recovery file: %w", err)
	}
	if s.fs.Remove(dir) == nil { // fails while other tablets' files are in it
		_ = s.fs.SyncDir(filepath.Dir(dir))
	}
	return nil
}

// replayRecoveryFiles replays the tablet's recovery files (its records
// split out of dead tservers' logs) into r. The tablet does not serve yet.
func (s *Server) replayRecoveryFiles(ctx context.Context, r *rp.Replica, m *pb.TabletMeta) error {
	if len(m.RecoveryFiles) == 0 {
		return nil
	}
	began := time.Now()
	var size int64
	records := 0
	for _, f := range m.RecoveryFiles {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := wal.ReplayRecoveryFile(s.fs, s.opts.Root, f, func(rec *wal.Record) error {
			if rec.TabletID != r.ID() {
				return nil // a split parent's records: the split flushed them
			}
			records++
			return r.Replay(rec)
		})
		if err != nil {
			return fmt.Errorf("tserver: replay recovery file of tablet %s: %w", r.ID(), err)
		}
		size += n
		s.metrics.onRecoveryRead(readRecoveryFile, n)
	}
	s.log.Info("recovery files replayed", "tablet", r.ID(), "epoch", r.Epoch(), "files", len(m.RecoveryFiles),
		"records", records, "recovery_bytes", size, "took", time.Since(began))
	return nil
}
