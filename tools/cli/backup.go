package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"bighive/client"
)

// defaultBackupExpiry is how long a backup made without --expire is kept.
const defaultBackupExpiry = 7 * 24 * time.Hour

var backupCommand = Command{
	Name: "backup", Args: "create TABLE BACKUP [--expire DUR|TIME] | list [TABLE] | describe BACKUP | update BACKUP --expire DUR|TIME | delete BACKUP | restore BACKUP TABLE | copy SRC DST [--expire DUR|TIME] | export BACKUP DIR | import DIR [--name BACKUP] [--expire DUR|TIME]",
	Summary: "back a table up by reference (its files are shared, nothing is copied), list and describe backups (each with the bytes it alone keeps alive and the bytes it shares), expire, delete, copy backups, restore one as a new table, export one to a directory and import it into a cluster",
	Example: "backup create orders orders-monday --expire 720h\nbackup list\nbackup list orders --json\nbackup describe orders-monday\n" +
		"backup update orders-monday --expire 2027-01-31T00:00:00Z\nbackup restore orders-monday orders-copy\nbackup delete orders-monday\n" +
		"backup copy orders-monday orders-monday-kept --expire 8760h\nbackup export orders-monday /mnt/archive/orders-monday\n" +
		"backup import /mnt/archive/orders-monday --name orders-monday --expire 720h   # on another cluster",
	Run: runBackup,
}

// backupArgs are the positional arguments each subcommand takes (min, max).
var backupArgs = map[string][2]int{
	"create": {2, 2}, "list": {0, 1}, "describe": {1, 1}, "update": {1, 1}, "delete": {1, 1}, "restore": {2, 2},
	"copy": {2, 2}, "export": {2, 2}, "import": {1, 1},
}

var backupUsage = map[string]string{
	"create": "create TABLE BACKUP [--expire DUR|TIME]", "list": "list [TABLE]", "describe": "describe BACKUP",
	"update": "update BACKUP --expire DUR|TIME", "delete": "delete BACKUP", "restore": "restore BACKUP TABLE",
	"copy": "copy SRC DST [--expire DUR|TIME]", "export": "export BACKUP DIR", "import": "import DIR [--name BACKUP] [--expire DUR|TIME]",
}

// parseExpire reads --expire: a duration from now (Go syntax, e.g. 720h)
// or an RFC 3339 time.
func parseExpire(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, Usagef("--expire %s: a duration must be positive", s)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, Usagef("--expire %q: want a duration (720h) or an RFC 3339 time (2027-01-31T00:00:00Z)", s)
	}
	return t, nil
}

func runBackup(ctx context.Context, env *Env, args []string) error {
	var expire, newName string
	ctx, done, c, pos, err := env.session(ctx, args, 1, 3, func(fs flagSet) {
		fs.StringVar(&expire, "expire", "", "create, update, copy, import: when the backup expires, a duration from now (720h) or an RFC 3339 time "+
			"(default for create: 168h; for copy and import: the source backup's)")
		fs.StringVar(&newName, "name", "", "import: the imported backup's name (default: the exported backup's)")
	})
	if err != nil {
		return err
	}
	defer done()
	sub := pos[0]
	n, ok := backupArgs[sub]
	if !ok {
		return Usagef("backup %s: unknown subcommand; use create, list, describe, update, delete, restore, copy, export or import", sub)
	}
	if pos = pos[1:]; len(pos) < n[0] || len(pos) > n[1] {
		return Usagef("usage: bighive backup %s", backupUsage[sub])
	}
	if expire != "" && sub != "create" && sub != "update" && sub != "copy" && sub != "import" {
		return Usagef("backup %s takes no --expire", sub)
	}
	if newName != "" && sub != "import" {
		return Usagef("backup %s takes no --name", sub)
	}
	switch sub {
	case "copy", "export", "import":
		return runBackupTransfer(ctx, env, c, sub, pos, expire, newName)
	case "create", "update":
		if expire == "" && sub == "update" {
			return Usagef("backup update needs --expire")
		}
		at := time.Now().Add(defaultBackupExpiry)
		if expire != "" {
			if at, err = parseExpire(expire, time.Now()); err != nil {
				return err
			}
		}
		var b client.BackupInfo
		if sub == "create" {
			start := time.Now()
			if b, err = c.CreateBackup(ctx, pos[0], pos[1], at); err != nil {
				return err
			}
			took := time.Since(start).Round(time.Millisecond)
			return env.result(backupObject(b, map[string]any{"took_ms": took.Milliseconds()}),
				"backed up table %s as %s (%d tablets, %d files, %s) in %s; expires %s", b.SourceTable, b.Name,
				len(b.SplitKeys)+1, b.Files, humanBytes(b.Bytes), took, b.Expires.UTC().Format(time.RFC3339))
		}
		if b, err = c.UpdateBackup(ctx, pos[0], at); err != nil {
			return err
		}
		return env.result(backupObject(b, nil), "backup %s now expires %s", b.Name, b.Expires.UTC().Format(time.RFC3339))
	case "list":
		table := ""
		if len(pos) > 0 {
			table = pos[0]
		}
		bs, err := c.ListBackups(ctx, table)
		if err != nil {
			return err
		}
		if env.JSON {
			for _, b := range bs {
				if err := env.object(backupObject(b, nil)); err != nil {
					return err
				}
			}
			return nil
		}
		rows := make([][]string, 0, len(bs))
		for _, b := range bs {
			rows = append(rows, []string{b.Name, b.SourceTable, fmt.Sprint(len(b.SplitKeys) + 1),
				humanBytes(b.ExclusiveBytes), humanBytes(b.SharedBytes),
				b.Created.UTC().Format(time.RFC3339), b.Expires.UTC().Format(time.RFC3339)})
		}
		return env.Table([]string{"BACKUP", "TABLE", "TABLETS", "EXCLUSIVE", "SHARED", "CREATED", "EXPIRES"}, rows)
	case "describe":
		b, err := c.GetBackup(ctx, pos[0])
		if err != nil {
			return err
		}
		if env.JSON {
			return env.object(backupObject(b, nil))
		}
		splits := make([]string, len(b.SplitKeys))
		for i, k := range b.SplitKeys {
			splits[i] = show(k)
		}
		return env.Table([]string{"BACKUP", "TABLE", "TABLETS", "FILES", "SIZE", "EXCLUSIVE", "SHARED", "CREATED", "EXPIRES", "SPLITS"},
			[][]string{{b.Name, b.SourceTable, fmt.Sprint(len(b.SplitKeys) + 1), fmt.Sprint(b.Files), humanBytes(b.Bytes),
				humanBytes(b.ExclusiveBytes), humanBytes(b.SharedBytes),
				b.Created.UTC().Format(time.RFC3339), b.Expires.UTC().Format(time.RFC3339), strings.Join(splits, ",")}})
	case "delete":
		if err := c.DeleteBackup(ctx, pos[0]); err != nil {
			return err
		}
		return env.result(map[string]any{"deleted": pos[0]}, "deleted backup %s", pos[0])
	default: // restore
		start := time.Now()
		t, err := c.RestoreTable(ctx, pos[0], pos[1])
		if err != nil {
			return err
		}
		took := time.Since(start).Round(time.Millisecond)
		return env.result(map[string]any{"backup": pos[0], "table": t.Name, "tablets": t.TabletCount, "took_ms": took.Milliseconds()},
			"restored backup %s as table %s (%d tablets) in %s", pos[0], t.Name, t.TabletCount, took)
	}
}

func backupObject(b client.BackupInfo, extra map[string]any) map[string]any {
	m := map[string]any{"backup": b.Name, "table": b.SourceTable, "tablets": len(b.SplitKeys) + 1, "split_keys": b.SplitKeys,
		"created": b.Created.UTC().Format(time.RFC3339Nano), "expires": b.Expires.UTC().Format(time.RFC3339Nano), "ready": b.Ready,
		"exclusive_bytes": b.ExclusiveBytes, "shared_bytes": b.SharedBytes}
	if b.Files > 0 {
		m["files"], m["bytes"] = b.Files, b.Bytes
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// runBackupTransfer runs copy, export and import.
func runBackupTransfer(ctx context.Context, env *Env, c *client.Client, sub string, pos []string, expire, newName string) error {
	var at time.Time
	if expire != "" {
		var err error
		if at, err = parseExpire(expire, time.Now()); err != nil {
			return err
		}
	}
	start := time.Now()
	switch sub {
	case "copy":
		if at.IsZero() {
			src, err := c.GetBackup(ctx, pos[0])
			if err != nil {
				return err
			}
			at = src.Expires
		}
		b, err := c.CopyBackup(ctx, pos[0], pos[1], at)
		if err != nil {
			return err
		}
		return env.result(backupObject(b, map[string]any{"source": pos[0]}), "copied backup %s as %s (%d tablets, %d files, shared); expires %s",
			pos[0], b.Name, len(b.SplitKeys)+1, b.Files, b.Expires.UTC().Format(time.RFC3339))
	case "export":
		r, err := c.ExportBackup(ctx, pos[0], pos[1])
		if err != nil {
			return err
		}
		took := time.Since(start).Round(time.Millisecond)
		return env.result(transferObject(r, pos[1], took), "exported backup %s to %s: %d tablets, %d files, %d entries, %s in %s",
			r.Backup, pos[1], r.Tablets, r.Files, r.Entries, humanBytes(r.Bytes), took)
	default: // import
		r, err := c.ImportBackup(ctx, pos[0], newName, at)
		if err != nil {
			return err
		}
		took := time.Since(start).Round(time.Millisecond)
		return env.result(transferObject(r, pos[0], took), "imported backup %s from %s: %d tablets, %d files, %d entries, %s in %s",
			r.Backup, pos[0], r.Tablets, r.Files, r.Entries, humanBytes(r.Bytes), took)
	}
}

func transferObject(r client.ExportResult, dir string, took time.Duration) map[string]any {
	return map[string]any{"backup": r.Backup, "dir": dir, "tablets": r.Tablets, "files": r.Files, "entries": r.Entries,
		"bytes": r.Bytes, "took_ms": took.Milliseconds()}
}
