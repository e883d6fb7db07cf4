package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestCodec(t *testing.T) {
	runs := []RunRecord{
		{ID: 1, Job: "a"},
		{
			ID: 1<<64 - 1, Job: "train-resnet", Fingerprint: "sha256:00ff", CPUIDs: []int{0, 7, 1 << 40, -1},
			GPUs: []string{"0", "GPU-6b1c", "MIG-1/2/3", ""}, RAMBytes: -1, PID: 1<<31 - 1, StartTicks: 1<<64 - 1,
			Start: t0, End: t0.Add(time.Nanosecond), ExitCode: -129, Signal: "SIGKILL", Reason: ReasonKilled,
		},
		{ID: 3, Job: "é ✓", Start: time.Unix(0, 0), End: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Reason: 200},
		{ID: 4, Job: "early", Start: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
		{ID: 5, Job: "share", GPUs: []string{"1"}, GPUMemBytes: 20 << 30, GPUMemPeakBytes: 24 << 30, Mark: "m"},
		{ID: 6, Job: "seen", GPUs: []string{"0"}, GPUMemPeakBytes: 1},
		{ID: 7, Job: "broken", Start: t0, End: t0, Reason: ReasonSpawnError, Cause: "program /opt/x does not exist"},
		{ID: 8, Job: "broken", GPUs: []string{"0"}, GPUMemBytes: 1 << 30, Reason: ReasonSpawnError, Cause: "é"},
		{ID: 9, Job: "stopping", Start: t0, Stopping: ReasonTimedOut, Cause: "it ran past its timeout of 2s"},
		{ID: 10, Job: "stopped", Start: t0, End: t0, Reason: ReasonKilled, Stopping: ReasonStopped},
		{ID: 11, Job: "handed", Start: t0, Stopping: ReasonStopped, Cause: "restarted on request (berth restart)", StopBegan: t0.Add(time.Minute)},
	}
	for _, r := range runs {
		enc := encodeRun(r)
		got, err := decodeRun(enc)
		if err != nil {
			t.Errorf("decode %+v: %v", r, err)
			continue
		}
		if !reflect.DeepEqual(got, normRun(r)) {
			t.Errorf("round trip\n%+v\nbecame\n%+v", r, got)
		}
		for i := range len(enc) {
			if _, err := decodeRun(enc[:i]); !errors.Is(err, ErrCorrupt) {
				t.Errorf("decode of %d of %d bytes = %v, want ErrCorrupt", i, len(enc), err)
			}
		}
		if _, err := decodeRun(append(slices.Clone(enc), 0)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode with a byte left over = %v, want ErrCorrupt", err)
		}
	}
	jobs := []JobRecord{
		{Name: "a"},
		{Name: "sweep-1", State: StateDone, Fingerprint: "x", DoneFingerprint: "x", Restarts: 1<<31 - 1, Changed: t0},
		{Name: "x", State: StateRunning, File: "/var/spool/berth/alice/é.lua"},
		{Name: "svc", State: StateStopped, StoppedAll: true, Changed: t0},
		{Name: "q3", State: StateUnplaceable, WaitedFor: 3*time.Hour + time.Nanosecond, Changed: t0},
		{Name: "q4", State: StateStopped, StoppedAll: true, WaitedFor: time.Second},
	}
	for _, j := range jobs {
		enc := encodeJob(j)
		got, err := decodeJob(enc)
		if err != nil || !reflect.DeepEqual(got, normJob(j)) {
			t.Errorf("round trip %+v: %+v, %v", j, got, err)
		}
		for i := range len(enc) {
			if _, err := decodeJob(enc[:i]); !errors.Is(err, ErrCorrupt) {
				t.Errorf("decode of %d of %d bytes = %v, want ErrCorrupt", i, len(enc), err)
			}
		}
	}
	for _, v := range [][]byte{{runV6 + 1}, {255, 0, 0}} {
		if _, err := decodeRun(v); !errors.Is(err, ErrNewer) {
			t.Errorf("decode run %v = %v, want ErrNewer", v, err)
		}
	}
	for _, v := range [][]byte{{jobV4 + 1}, {255, 0, 0}} {
		if _, err := decodeJob(v); !errors.Is(err, ErrNewer) {
			t.Errorf("decode job %v = %v, want ErrNewer", v, err)
		}
	}
	// A count that claims more elements than bytes remain is refused before
	// anything is allocated for it.
	huge := []byte{runV1, 1, 1, 'a', 0}
	huge = binary.AppendUvarint(huge, 1<<62)
	if _, err := decodeRun(huge); !errors.Is(err, ErrCorrupt) {
		t.Errorf("decode with a huge count = %v", err)
	}
}

// fuzzRoundTrip checks what a decoder accepted: encoding it and
// decoding that must work and give the same bytes again.
func fuzzRoundTrip[R any](t *testing.T, data []byte, dec func([]byte) (R, error), enc func(R) []byte) {
	r, err := dec(data)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewer) {
			t.Fatalf("decode error %v is neither ErrCorrupt nor ErrNewer", err)
		}
		return
	}
	e1 := enc(r)
	r2, err := dec(e1)
	if err != nil {
		t.Fatalf("re-decoding %x: %v", e1, err)
	}
	if e2 := enc(r2); !bytes.Equal(e1, e2) {
		t.Fatalf("unstable encoding: %x then %x", e1, e2)
	}
}

func FuzzDecodeRun(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{runV1})
	f.Add(encodeRun(RunRecord{ID: 1, Job: "a"}))
	f.Add(encodeRun(RunRecord{ID: 7, Job: "train", CPUIDs: []int{1, 2}, GPUs: []string{"0"}, Start: t0, End: t0, Signal: "SIGKILL", Reason: ReasonFailed}))
	f.Add(encodeRun(RunRecord{ID: 8, Job: "infer", GPUs: []string{"1"}, GPUMemBytes: 20 << 30, GPUMemPeakBytes: 22 << 30, Mark: "m", Start: t0}))
	f.Add(encodeRun(RunRecord{ID: 9, Job: "stop", Start: t0, Stopping: ReasonStopped, Cause: "its definition changed"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, decodeRun, encodeRun)
	})
}

func FuzzDecodeJob(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeJob(JobRecord{Name: "a"}))
	f.Add(encodeJob(JobRecord{Name: "sweep-1", State: StateDone, Fingerprint: "x", DoneFingerprint: "x", Restarts: 3, Changed: t0}))
	f.Add(encodeJob(JobRecord{Name: "x", File: "/etc/berth/jobs.d/b.lua"}))
	f.Add(encodeJob(JobRecord{Name: "svc", State: StateStopped, StoppedAll: true, Changed: t0}))
	f.Add(encodeJob(JobRecord{Name: "svc", State: StateInvalid, WaitedFor: time.Hour, Changed: t0}))
	v1, _ := hex.DecodeString("0101610100000000") // version 1: name "a", nothing else
	f.Add(v1)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, decodeJob, encodeJob)
	})
}
