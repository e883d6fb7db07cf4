package supervisor

import (
	"cmp"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The output of a job no longer declared stays readable (berth logs of a
// removed or renamed job) within bounds, or the log files of every name a
// job ever had would fill the state's disk: a person who renamed a few
// jobs that wrote their 32 MiB left 100 MiB behind each time. Once their
// job is gone, its files go after goneLogsAge, and the oldest first while
// those of all such jobs come to more than goneLogsBytes. A declared job's
// files are bounded by its cap (LogBytes, twice over with the rotated
// one).
const (
	goneLogsAge   = 30 * 24 * time.Hour
	goneLogsBytes = 1 << 30
	logPruneEvery = 10 * time.Minute
)

// pruneLogsEvery prunes the logs of jobs no longer declared every
// logPruneEvery, until ctx ends.
func (d *Daemon) pruneLogsEvery(ctx context.Context) {
	every(ctx, logPruneEvery, func() bool {
		d.pruneGoneLogs(time.Now(), goneLogsAge, goneLogsBytes)
		return false
	})
}

// pruneGoneLogs removes the log files of jobs not declared now that are
// older than age, then the oldest of the rest while they come to more
// than bytes. It returns how many files it removed.
func (d *Daemon) pruneGoneLogs(now time.Time, age time.Duration, bytes int64) int {
	if d.cfg.JournalSocket != "" {
		return 0 // journald keeps the output, and bounds it
	}
	d.mu.Lock()
	declared := make(map[string]bool, len(d.jobs))
	for name := range d.jobs {
		declared[name] = true
	}
	d.mu.Unlock()
	type gone struct {
		path string
		mod  time.Time
		size int64
	}
	var files []gone
	var total int64
	dir := filepath.Join(d.cfg.StateDir, "logs")
	// A person's jobs' files are in a directory of theirs: one level down.
	_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		rel := strings.TrimPrefix(path, dir+"/")
		switch {
		case err != nil:
			return nil
		case e.IsDir() && path != dir && strings.Contains(rel, "/"):
			return filepath.SkipDir
		case e.IsDir():
			return nil
		}
		job, ok := strings.CutSuffix(strings.TrimSuffix(rel, ".1"), ".log")
		if !ok || declared[job] || !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		files = append(files, gone{path: path, mod: info.ModTime(), size: info.Size()})
		total += info.Size()
		return nil
	})
	slices.SortFunc(files, func(a, b gone) int { return cmp.Compare(a.mod.UnixNano(), b.mod.UnixNano()) })
	removed, freed := 0, int64(0)
	for _, f := range files {
		if now.Sub(f.mod) < age && total <= bytes {
			break // the rest are younger, and within the bound
		}
		if err := os.Remove(f.path); err != nil {
			continue
		}
		total -= f.size
		removed, freed = removed+1, freed+f.size
	}
	if removed > 0 {
		d.log.Info("removed the output of jobs no longer declared", "files", removed, "bytes", freed)
	}
	return removed
}
