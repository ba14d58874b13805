package blockstore

import "slices"

// handleIOError is every data dir's error hook: it calls Options.OnIOError,
// then marks the directory failed if the error is a disk failure.
func (fm *FsManager) handleIOError(d *dataDir, err error) {
	if fm.opts.OnIOError != nil {
		fm.opts.OnIOError(d.path, err)
	}
	if fm.opts.isDiskFailure(err) {
		fm.markDirFailed(d, err)
	}
}

// markDirFailed marks d failed (once): later operations skip it, blocks in
// it fail to open with ErrDirFailed, and Options.OnTabletsFailed hears of
// the tablets whose group includes it.
func (fm *FsManager) markDirFailed(d *dataDir, err error) {
	if !d.failed.CompareAndSwap(false, true) {
		return
	}
	tablets := fm.TabletsInDir(d.uuid)
	fm.opts.Logger.Error("blockstore: data dir failed; it is skipped from now on", "dir", d.path, "uuid", d.uuid,
		"err", err, "affected_tablets", len(tablets), "healthy_dirs", len(healthyOf(fm.dirs)))
	if fm.opts.OnTabletsFailed != nil {
		fm.opts.OnTabletsFailed(d.uuid, d.path, tablets)
	}
}

// FailedDirs lists the data dirs that failed, at Open (they did not open)
// or since, in option order.
func (fm *FsManager) FailedDirs() []string {
	var out []string
	for _, r := range fm.dataRoots {
		i := slices.IndexFunc(fm.dirs, func(d *dataDir) bool { return d.path == r })
		if i < 0 || fm.dirs[i].failed.Load() {
			out = append(out, r)
		}
	}
	return out
}

// AllDirsFailed reports whether no data dir is healthy any more (the
// tserver must stop).
func (fm *FsManager) AllDirsFailed() bool { return len(healthyOf(fm.dirs)) == 0 }
