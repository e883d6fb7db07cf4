package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// view runs fn in a read-only transaction.
func (s *Store) view(fn func(b buckets) error) error {
	err := s.db.View(func(tx *bbolt.Tx) error {
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		return fn(b)
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// jobs returns every stored job, sorted by name; tests read them all.
func (s *Store) jobs() ([]JobRecord, error) {
	var jobs []JobRecord
	err := s.view(func(b buckets) error {
		return b.jobs.ForEach(func(k, v []byte) error {
			j, err := decodeJob(v)
			if err != nil {
				return fmt.Errorf("job %q: %w", k, err)
			}
			jobs = append(jobs, j)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	return jobs, nil
}

// JobFiles returns the job files that the stored jobs were declared in,
// as recorded (JobRecord.File).
func (s *Store) JobFiles() (map[string]bool, error) {
	files := map[string]bool{}
	err := s.view(func(b buckets) error {
		return b.jobs.ForEach(func(k, v []byte) error {
			j, err := decodeJob(v)
			if err != nil {
				return fmt.Errorf("job %q: %w", k, err)
			}
			if j.File != "" {
				files[j.File] = true
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	return files, nil
}

// Job returns the stored job name; found is false when there is none.
func (s *Store) Job(name string) (j JobRecord, found bool, err error) {
	if name == "" {
		return JobRecord{}, false, nil
	}
	err = s.view(func(b buckets) error {
		v := b.jobs.Get([]byte(name))
		if v == nil {
			return nil
		}
		found = true
		j, err = decodeJob(v)
		return err
	})
	if err != nil {
		return JobRecord{}, false, fmt.Errorf("read job %q: %w", name, err)
	}
	return j, found, nil
}

// Runs returns up to n runs of job, newest first; job "" means every job,
// n <= 0 means no limit.
func (s *Store) Runs(job string, n int) ([]RunRecord, error) {
	if job == "" {
		return s.RunsWhere(nil, n)
	}
	var runs []RunRecord
	err := s.view(func(b buckets) error {
		idx := b.byJob.Bucket([]byte(job))
		if idx == nil {
			return nil
		}
		c := idx.Cursor()
		for k, _ := c.Last(); k != nil && (n <= 0 || len(runs) < n); k, _ = c.Prev() {
			id := binary.BigEndian.Uint64(k)
			r, found, err := b.getRun(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%w: job %q lists run %d, which does not exist", ErrCorrupt, job, id)
			}
			runs = append(runs, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return runs, nil
}

// RunsWhere returns up to n runs, newest first, of the jobs keep keeps
// (nil keeps all); n <= 0 means no limit.
func (s *Store) RunsWhere(keep func(job string) bool, n int) ([]RunRecord, error) {
	var runs []RunRecord
	err := s.view(func(b buckets) error {
		c := b.runs.Cursor()
		for k, v := c.Last(); k != nil && (n <= 0 || len(runs) < n); k, v = c.Prev() {
			r, err := decodeRun(v)
			if err != nil {
				return fmt.Errorf("run %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if keep == nil || keep(r.Job) {
				runs = append(runs, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return runs, nil
}

// RunsOfPrefix returns up to n runs of the jobs whose names begin with
// prefix (the indices of an array: "sweep["), newest first; n <= 0 means
// no limit.
func (s *Store) RunsOfPrefix(prefix string, n int) ([]RunRecord, error) {
	var ids []uint64
	var runs []RunRecord
	err := s.view(func(b buckets) error {
		c := b.byJob.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			idx := b.byJob.Bucket(k)
			if v != nil || idx == nil {
				continue
			}
			// Each job's newest n at most: no others can be among the
			// newest n of them all.
			ic := idx.Cursor()
			taken := 0
			for rk, _ := ic.Last(); rk != nil && (n <= 0 || taken < n); rk, _ = ic.Prev() {
				ids = append(ids, binary.BigEndian.Uint64(rk))
				taken++
			}
		}
		slices.SortFunc(ids, func(a, b uint64) int { return cmp.Compare(b, a) })
		if n > 0 && len(ids) > n {
			ids = ids[:n]
		}
		for _, id := range ids {
			r, found, err := b.getRun(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%w: a job's index lists run %d, which does not exist", ErrCorrupt, id)
			}
			runs = append(runs, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return runs, nil
}

// run returns run id; found is false when there is none. Tests use it.
func (s *Store) run(id uint64) (r RunRecord, found bool, err error) {
	err = s.view(func(b buckets) error {
		r, found, err = b.getRun(id)
		return err
	})
	if err != nil {
		return RunRecord{}, false, fmt.Errorf("read run %d: %w", id, err)
	}
	return r, found, nil
}

// OpenRuns returns the runs with no end, oldest first: at start-up, what a
// previous life of the daemon left running.
func (s *Store) OpenRuns() ([]RunRecord, error) {
	var runs []RunRecord
	err := s.view(func(b buckets) error {
		return b.open.ForEach(func(k, _ []byte) error {
			id := binary.BigEndian.Uint64(k)
			r, found, err := b.getRun(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%w: open run %d does not exist", ErrCorrupt, id)
			}
			runs = append(runs, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read open runs: %w", err)
	}
	return runs, nil
}
