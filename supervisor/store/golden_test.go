package store

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// rewriteV1 is its own flag, not testkit's -update: v1.db is no golden
// output to refresh but a record of what berth once wrote.
var rewriteV1 = flag.Bool("rewrite-v1", false, "rewrite testdata/v1.db from v1Runs and v1Jobs")

// v1T0 is the time the golden records count from.
var v1T0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

// v1Instance is the instance of testdata/v1.db.
const v1Instance = "75d42d8564c6f3f4"

// v1Runs and v1Jobs are what testdata/v1.db holds. The file was written by
// the store as it stood before it became this package, through BeginRun,
// SetRunPID, EndRun, MarkLost and PutJob, so it pins the format as berth
// wrote it, not as this code would. Rewriting it (-rewrite-v1) is for
// adding records, never for making the test pass: a change of format gets
// a new version and a new file beside this one, and this one must still be
// read.
var v1Runs = []RunRecord{
	{ID: 1, Job: "train", Fingerprint: "fp-train-1", CPUIDs: []int{0, 1, 2, 3}, GPUs: []string{"GPU-5f1c2a", "2"}, RAMBytes: 32 << 30,
		PID: 4242, StartTicks: 123456, Start: v1T0, End: v1T0.Add(90 * time.Minute), ExitCode: -1, Signal: "SIGTERM", Reason: ReasonStopped},
	{ID: 2, Job: "eval", Fingerprint: "fp-eval", CPUIDs: []int{4},
		PID: 4300, StartTicks: 123500, Start: v1T0.Add(time.Minute), End: v1T0.Add(2*time.Minute + 500*time.Millisecond), Reason: ReasonExited},
	{ID: 3, Job: "sweep-1", Fingerprint: "fp-sweep-1", CPUIDs: []int{5, 6}, GPUs: []string{"0"}, RAMBytes: 1 << 30,
		PID: 4400, StartTicks: 124000, Start: v1T0.Add(3 * time.Minute), End: v1T0.Add(4 * time.Minute), ExitCode: 3, Reason: ReasonFailed},
	{ID: 4, Job: "sweep-1", Fingerprint: "fp-sweep-1", CPUIDs: []int{5, 6}, GPUs: []string{"0"}, RAMBytes: 1 << 30,
		PID: 4500, StartTicks: 125000, Start: v1T0.Add(5 * time.Minute), End: v1T0.Add(6 * time.Minute), Signal: "SIGSEGV", Reason: ReasonFailed},
	{ID: 5, Job: "sweep-1", Fingerprint: "fp-sweep-1", CPUIDs: []int{5, 6}, GPUs: []string{"0"}, RAMBytes: 1 << 30,
		PID: 4600, StartTicks: 126000, Start: v1T0.Add(7 * time.Minute), End: v1T0.Add(19 * time.Minute), Signal: "SIGTERM", Reason: ReasonTimedOut},
	{ID: 6, Job: "deaf", Fingerprint: "fp-deaf",
		PID: 4700, StartTicks: 127000, Start: v1T0.Add(8 * time.Minute), End: v1T0.Add(9 * time.Minute), Signal: "SIGKILL", Reason: ReasonKilled},
	{ID: 7, Job: "old", Fingerprint: "fp-old", CPUIDs: []int{7},
		PID: 4800, StartTicks: 128000, Start: v1T0.Add(10 * time.Minute), End: v1T0.Add(11 * time.Minute), Reason: ReasonLost},
	{ID: 8, Job: "broken", Fingerprint: "fp-broken",
		Start: v1T0.Add(12 * time.Minute), End: v1T0.Add(12 * time.Minute), Reason: ReasonSpawnError},
	{ID: 9, Job: "train", Fingerprint: "fp-train-2", CPUIDs: []int{0, 1, 2, 3}, GPUs: []string{"GPU-5f1c2a", "2"}, RAMBytes: 32 << 30,
		PID: 5151, StartTicks: 200000, Start: v1T0.Add(90 * time.Minute)}, // still running
}

// v1Jobs is sorted by name, as jobs() returns them.
var v1Jobs = []JobRecord{
	{Name: "big", State: StateUnplaceable, Fingerprint: "fp-big"},
	{Name: "broken", State: StateInvalid, Fingerprint: "fp-broken", Changed: v1T0.Add(12 * time.Minute)},
	{Name: "deaf", State: StateStopped, Fingerprint: "fp-deaf", Changed: v1T0.Add(9 * time.Minute)},
	{Name: "eval", State: StateDone, Fingerprint: "fp-eval", DoneFingerprint: "fp-eval", Changed: v1T0.Add(2*time.Minute + 500*time.Millisecond)},
	{Name: "off", State: StateDisabled, Fingerprint: "fp-off", DoneFingerprint: "fp-off-0", Changed: v1T0.Add(-24 * time.Hour)},
	{Name: "sweep-1", State: StateFailed, Fingerprint: "fp-sweep-1", Restarts: 2, Changed: v1T0.Add(19 * time.Minute)},
	{Name: "train", State: StateRunning, Fingerprint: "fp-train-2", Changed: v1T0.Add(90 * time.Minute)},
}

// TestGoldenV1 reads a state file of format 1 and finds in it exactly the
// records it was written with.
func TestGoldenV1(t *testing.T) {
	golden := filepath.Join("testdata", "v1.db")
	if *rewriteV1 {
		writeV1(t, golden)
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	// Opening writes to the file (the buckets are made sure of), so the
	// store gets a copy.
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTestAt(t, path, Options{})

	if got := s.Instance(); got != v1Instance {
		t.Errorf("instance %q, want %q", got, v1Instance)
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		if got := tx.Bucket(bucketMeta).Get(keyFormat); !slices.Equal(got, []byte{1}) {
			t.Errorf("format key %v, want [1]", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs("", 0)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(runs)
	if !reflect.DeepEqual(runs, v1Runs) {
		t.Errorf("runs of v1.db:\n%s\nwant\n%s", records(runs), records(v1Runs))
	}
	jobs, err := s.jobs()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(jobs, v1Jobs) {
		t.Errorf("jobs of v1.db:\n%s\nwant\n%s", records(jobs), records(v1Jobs))
	}
	// The indexes: by job, newest first, and the runs still open.
	sweep, err := s.Runs("sweep-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := runIDs(sweep); !slices.Equal(got, []uint64{5, 4}) {
		t.Errorf("the last 2 runs of sweep-1 are %v, want [5 4]", got)
	}
	open, err := s.OpenRuns()
	if err != nil {
		t.Fatal(err)
	}
	if got := runIDs(open); !slices.Equal(got, []uint64{9}) {
		t.Errorf("open runs %v, want [9]", got)
	}
	// A record of this version is read beside those of version 1.
	if err := s.PutJob(JobRecord{Name: "new", State: StateDone, Fingerprint: "fp-new", File: "/etc/berth/jobs.d/b.lua"}); err != nil {
		t.Fatal(err)
	}
	jobs, err = s.jobs()
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Insert(slices.Clone(v1Jobs), 4, JobRecord{Name: "new", State: StateDone, Fingerprint: "fp-new", File: "/etc/berth/jobs.d/b.lua"})
	if !reflect.DeepEqual(jobs, want) {
		t.Errorf("jobs of v1.db with one of this version:\n%s\nwant\n%s", records(jobs), records(want))
	}
	// The next run continues the file's sequence.
	if r := begin(t, s, "train", v1T0.Add(2*time.Hour)); r.ID != 10 {
		t.Errorf("the next run has id %d, want 10", r.ID)
	}
}

// writeV1 writes v1Runs and v1Jobs to path as a fresh state file of
// instance v1Instance.
func writeV1(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keyFormat, []byte{1}); err != nil {
			return err
		}
		return meta.Put(keyInstance, []byte(v1Instance))
	})
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range v1Runs {
		if _, err := s.BeginRun(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range v1Jobs {
		if err := s.PutJob(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The lock file Open left beside it is no part of the record.
	if err := os.Remove(filepath.Join(filepath.Dir(path), lockName)); err != nil {
		t.Fatal(err)
	}
}

// records prints one record a line, for a readable difference.
func records[R any](rs []R) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%+v\n", r)
	}
	return b.String()
}

// TestGoldenBytes decodes records as format 1 encodes them, byte for byte,
// and encodes them back to the same bytes.
func TestGoldenBytes(t *testing.T) {
	run := RunRecord{ID: 1, Job: "train", Fingerprint: "fp-train-1", CPUIDs: []int{0, 1, 2, 3}, GPUs: []string{"GPU-5f1c2a", "2"},
		RAMBytes: 32 << 30, PID: 4242, StartTicks: 123456, Start: v1T0, End: v1T0.Add(90 * time.Minute),
		ExitCode: -1, Signal: "SIGTERM", Reason: ReasonStopped}
	runHex := "01" + // version
		"01" + // ID, uvarint
		"05" + "747261696e" + // Job, length then bytes
		"0a" + "66702d747261696e2d31" + // Fingerprint
		"04" + "00020406" + // CPUIDs: count, then zigzag varints
		"02" + "0a4750552d356631633261" + "0132" + // GPUs: count, then strings
		"808080808002" + // RAMBytes, zigzag varint
		"a442" + // PID, zigzag varint
		"c0c407" + // StartTicks, uvarint
		"01" + "80db97fc0c" + "959aef3a" + // Start: set, Unix seconds (zigzag), nanoseconds
		"01" + "b0af98fc0c" + "959aef3a" + // End
		"01" + // ExitCode -1, zigzag varint
		"07" + "5349475445524d" + // Signal
		"04" // Reason
	job := JobRecord{Name: "sweep-1", State: StateFailed, Fingerprint: "fp-sweep-1", DoneFingerprint: "fp-sweep-0",
		Restarts: 2, Changed: v1T0.Add(19 * time.Minute)}
	jobHex := "01" + // version
		"07" + "73776565702d31" + // Name
		"07" + // State
		"0a" + "66702d73776565702d31" + // Fingerprint
		"0a" + "66702d73776565702d30" + // DoneFingerprint
		"04" + // Restarts, zigzag varint
		"01" + "e8ec97fc0c" + "959aef3a" // Changed

	// Version 2 of a job record is version 1 and then the file.
	jobV2 := job
	jobV2.File = "/etc/berth/jobs.d/sweep.lua"
	jobV2Hex := "02" + jobHex[2:] +
		"1b" + "2f6574632f62657274682f6a6f62732e642f73776565702e6c7561" // File

	// Version 2 of a run record is version 1 and then the mark; a run
	// without a mark is still written as version 1.
	runV2 := run
	runV2.Mark = "fp-train-1|prep=00ff"
	runV2Hex := "02" + runHex[2:] +
		"14" + "66702d747261696e2d317c707265703d30306666" // Mark

	// Version 3 is version 2 and then the card memory (zigzag varints);
	// version 4 is version 3 and then why the run could not start.
	runV3 := runV2
	runV3.GPUMemBytes = 1 << 30
	runV3Hex := "03" + runV2Hex[2:] +
		"8080808008" + // GPUMemBytes
		"00" // GPUMemPeakBytes
	runV4 := run
	runV4.Cause = "no such file"
	runV4Hex := "04" + runHex[2:] +
		"00" + // Mark
		"00" + "00" + // GPUMemBytes, GPUMemPeakBytes
		"0c" + "6e6f20737563682066696c65" // Cause
	for _, tt := range []struct {
		r   RunRecord
		hex string
	}{{runV3, runV3Hex}, {runV4, runV4Hex}} {
		b, _ := hex.DecodeString(tt.hex)
		if got, err := decodeRun(b); err != nil || !reflect.DeepEqual(got, tt.r) {
			t.Errorf("decodeRun(%s) = %+v, %v; want %+v", tt.hex, got, err, tt.r)
		}
		if got := hex.EncodeToString(encodeRun(tt.r)); got != tt.hex {
			t.Errorf("encodeRun = %s, want %s", got, tt.hex)
		}
	}

	b, _ := hex.DecodeString(runHex)
	if got, err := decodeRun(b); err != nil || !reflect.DeepEqual(got, run) {
		t.Errorf("decodeRun(%s) = %+v, %v; want %+v", runHex, got, err, run)
	}
	if got := hex.EncodeToString(encodeRun(run)); got != runHex {
		t.Errorf("encodeRun = %s, want %s", got, runHex)
	}
	b, _ = hex.DecodeString(runV2Hex)
	if got, err := decodeRun(b); err != nil || !reflect.DeepEqual(got, runV2) {
		t.Errorf("decodeRun(%s) = %+v, %v; want %+v", runV2Hex, got, err, runV2)
	}
	if got := hex.EncodeToString(encodeRun(runV2)); got != runV2Hex {
		t.Errorf("encodeRun = %s, want %s", got, runV2Hex)
	}
	// Version 1 is still read, and no longer written.
	b, _ = hex.DecodeString(jobHex)
	if got, err := decodeJob(b); err != nil || !reflect.DeepEqual(got, job) {
		t.Errorf("decodeJob(%s) = %+v, %v; want %+v", jobHex, got, err, job)
	}
	// Version 3 is version 2 and then StoppedAll, written only where it
	// is true; version 4, version 3 and then WaitedFor, written only where
	// it is not zero: an older daemon reads the others.
	jobV3 := jobV2
	jobV3.State, jobV3.StoppedAll = StateStopped, true
	jobV4 := jobV2
	jobV4.State, jobV4.WaitedFor = StateUnplaceable, 90*time.Second
	for _, v := range []struct {
		rec JobRecord
		hex string
	}{
		{jobV2, jobV2Hex},
		{jobV3, "03" + jobV2Hex[2:18] + "08" + jobV2Hex[20:] + "01"},                  // State stopped, StoppedAll
		{jobV4, "04" + jobV2Hex[2:18] + "0a" + jobV2Hex[20:] + "00" + "8090d8c69e05"}, // State unplaceable, not StoppedAll, 90 s in ns (zigzag varint)
	} {
		b, _ = hex.DecodeString(v.hex)
		if got, err := decodeJob(b); err != nil || !reflect.DeepEqual(got, v.rec) {
			t.Errorf("decodeJob(%s) = %+v, %v; want %+v", v.hex, got, err, v.rec)
		}
		if got := hex.EncodeToString(encodeJob(v.rec)); got != v.hex {
			t.Errorf("encodeJob = %s, want %s", got, v.hex)
		}
	}
}
