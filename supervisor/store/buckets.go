package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
)

const (
	// format is the layout of buckets and keys. Records carry their
	// own version byte; this number changes only when the layout does.
	format = 1

	// Runs are appended at the end of the key space, and most updates
	// (pid, end) touch the newest pages, so pages are packed fuller than
	// bbolt's 50 %; not to 100 % because EndRun grows a record in place and
	// a packed page would split on the first update. The per-job indexes hold
	// fixed-size keys that never change, so they are packed full.
	runsFill  = 0.9
	indexFill = 1.0
)

// Bucket names: the layout of DESIGN.md's state.db. Keys of run buckets are
// big-endian ids, so byte order is chronological order.
var (
	bucketMeta      = []byte("meta")        // "format" → format, "instance" → Instance
	bucketJobs      = []byte("jobs")        // name → encoded JobRecord
	bucketRuns      = []byte("runs")        // id → encoded RunRecord; its sequence is the highest id reserved (runids.go)
	bucketRunsByJob = []byte("runs_by_job") // one nested bucket per job name: id → empty
	bucketRunsOpen  = []byte("runs_open")   // id → empty, for every run with no End
	keyFormat       = []byte("format")
	keyInstance     = []byte("instance") // random hex, made with the file
	// keyClosed is there while no daemon has the file open and the last
	// one closed it (Close), so that none of its runs can be running
	// without a record: a daemon killed outright leaves it out.
	keyClosed = []byte("closed")
)

// buckets gives an operation its buckets with this transaction's fill
// factors set (bbolt does not persist FillPercent).
type buckets struct {
	meta, jobs, runs, byJob, open *bbolt.Bucket
}

func bucketsOf(tx *bbolt.Tx) (buckets, error) {
	b := buckets{
		meta:  tx.Bucket(bucketMeta),
		jobs:  tx.Bucket(bucketJobs),
		runs:  tx.Bucket(bucketRuns),
		byJob: tx.Bucket(bucketRunsByJob),
		open:  tx.Bucket(bucketRunsOpen),
	}
	if b.meta == nil || b.jobs == nil || b.runs == nil || b.byJob == nil || b.open == nil {
		return b, fmt.Errorf("%w: a bucket is missing", ErrCorrupt)
	}
	if tx.Writable() {
		b.runs.FillPercent = runsFill
	}
	return b, nil
}

func runKey(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

// getRun reads run id; found is false when there is none.
func (b buckets) getRun(id uint64) (r RunRecord, found bool, err error) {
	v := b.runs.Get(runKey(id))
	if v == nil {
		return RunRecord{}, false, nil
	}
	r, err = decodeRun(v)
	if err != nil {
		return RunRecord{}, true, fmt.Errorf("run %d: %w", id, err)
	}
	if r.ID != id {
		return RunRecord{}, true, fmt.Errorf("run %d: %w: record says id %d", id, ErrCorrupt, r.ID)
	}
	return r, true, nil
}

// putRun writes an existing run back and keeps the open index in step.
func (b buckets) putRun(r RunRecord) error {
	k := runKey(r.ID)
	if err := b.runs.Put(k, encodeRun(r)); err != nil {
		return err
	}
	if r.End.IsZero() {
		return b.open.Put(k, nil)
	}
	return b.open.Delete(k)
}

// addRun writes a new run, r.ID given (NextRunID), and its index entries,
// and trims the job's history to keep runs, all in the caller's
// transaction.
func (b buckets) addRun(r RunRecord, keep int) error {
	if r.ID == 0 {
		return errors.New("add run: no id")
	}
	if b.runs.Get(runKey(r.ID)) != nil {
		return fmt.Errorf("add run %d: the id is taken", r.ID)
	}
	if seq := b.runs.Sequence(); r.ID > seq {
		// An id not reserved would be handed out again after a restart.
		return fmt.Errorf("add run %d: not among the ids reserved (up to %d)", r.ID, seq)
	}
	idx, err := b.byJob.CreateBucketIfNotExists([]byte(r.Job))
	if err != nil {
		return fmt.Errorf("index for job %q: %w", r.Job, err)
	}
	idx.FillPercent = indexFill
	if err := b.putRun(r); err != nil {
		return err
	}
	if err := idx.Put(runKey(r.ID), nil); err != nil {
		return err
	}
	return b.trim(idx, keep)
}

// trim deletes the oldest runs of one job's index beyond keep. Keys are
// collected first and deleted by key: Cursor.Delete followed by Next skips
// every other key (etcd-io/bbolt#146).
func (b buckets) trim(idx *bbolt.Bucket, keep int) error {
	n := 0
	c := idx.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	if n <= keep {
		return nil
	}
	old := make([][]byte, 0, n-keep)
	for k, _ := c.First(); k != nil && len(old) < n-keep; k, _ = c.Next() {
		old = append(old, bytes.Clone(k))
	}
	for _, k := range old {
		for _, bk := range []*bbolt.Bucket{idx, b.runs, b.open} {
			if err := bk.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}
