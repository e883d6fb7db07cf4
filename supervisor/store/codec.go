package store

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"
)

// Record encoding. Every value starts with a version byte; the rest is
// varints and length-prefixed strings in a fixed order. A new field means a
// new version whose decoder reads the old ones too; a version this build
// does not know is ErrNewer, never a guess.
const (
	runV1 = 1 // written for a run without a Mark, as before marks existed
	runV2 = 2 // runV1's fields, then Mark
	runV3 = 3 // runV2's fields, then GPUMemBytes and GPUMemPeakBytes: a run that used a card
	runV4 = 4 // runV3's fields, then Cause: a run that could not be started
	runV5 = 5 // runV4's fields, then Stopping: a run berth began to stop
	runV6 = 6 // runV5's fields, then StopBegan: a run being stopped, until its end is recorded
	jobV1 = 1 // read only: written before jobs recorded their file
	jobV2 = 2 // jobV1's fields, then File
	jobV3 = 3 // jobV2's fields, then StoppedAll
	jobV4 = 4 // jobV3's fields, then WaitedFor
)

func encodeRun(r RunRecord) []byte {
	b := make([]byte, 0, 96+len(r.Job)+len(r.Fingerprint)+len(r.Mark)+len(r.Cause))
	ver := byte(runV1)
	switch {
	case !r.StopBegan.IsZero():
		ver = runV6
	case r.Stopping != 0:
		ver = runV5
	case r.Cause != "":
		ver = runV4
	case r.GPUMemBytes != 0 || r.GPUMemPeakBytes != 0:
		ver = runV3
	case r.Mark != "":
		ver = runV2
	}
	b = append(b, ver)
	b = binary.AppendUvarint(b, r.ID)
	b = appendString(b, r.Job)
	b = appendString(b, r.Fingerprint)
	b = binary.AppendUvarint(b, uint64(len(r.CPUIDs)))
	for _, c := range r.CPUIDs {
		b = binary.AppendVarint(b, int64(c))
	}
	b = binary.AppendUvarint(b, uint64(len(r.GPUs)))
	for _, g := range r.GPUs {
		b = appendString(b, g)
	}
	b = binary.AppendVarint(b, r.RAMBytes)
	b = binary.AppendVarint(b, int64(r.PID))
	b = binary.AppendUvarint(b, r.StartTicks)
	b = appendTime(b, r.Start)
	b = appendTime(b, r.End)
	b = binary.AppendVarint(b, int64(r.ExitCode))
	b = appendString(b, r.Signal)
	b = append(b, byte(r.Reason))
	if ver >= runV2 {
		b = appendString(b, r.Mark)
	}
	if ver >= runV3 {
		b = binary.AppendVarint(b, r.GPUMemBytes)
		b = binary.AppendVarint(b, r.GPUMemPeakBytes)
	}
	if ver >= runV4 {
		b = appendString(b, r.Cause)
	}
	if ver >= runV5 {
		b = append(b, byte(r.Stopping))
	}
	if ver >= runV6 {
		b = appendTime(b, r.StopBegan)
	}
	return b
}

// decodeRun decodes a run record. It never panics, whatever the bytes:
// they come from a file that may be damaged.
func decodeRun(v []byte) (RunRecord, error) {
	d := decoder{b: v}
	var r RunRecord
	switch ver := d.readByte(); {
	case d.err != nil:
	case ver >= runV1 && ver <= runV6:
		r.ID = d.readUvarint()
		r.Job = d.readString()
		r.Fingerprint = d.readString()
		if n := d.readCount(); n > 0 {
			r.CPUIDs = make([]int, n)
			for i := range r.CPUIDs {
				r.CPUIDs[i] = d.readInt()
			}
		}
		if n := d.readCount(); n > 0 {
			r.GPUs = make([]string, n)
			for i := range r.GPUs {
				r.GPUs[i] = d.readString()
			}
		}
		r.RAMBytes = d.readVarint()
		r.PID = d.readInt()
		r.StartTicks = d.readUvarint()
		r.Start = d.readTime()
		r.End = d.readTime()
		r.ExitCode = d.readInt()
		r.Signal = d.readString()
		r.Reason = Reason(d.readByte())
		if ver >= runV2 {
			r.Mark = d.readString()
		}
		if ver >= runV3 {
			r.GPUMemBytes = d.readVarint()
			r.GPUMemPeakBytes = d.readVarint()
		}
		if ver >= runV4 {
			r.Cause = d.readString()
		}
		if ver >= runV5 {
			r.Stopping = Reason(d.readByte())
		}
		if ver >= runV6 {
			r.StopBegan = d.readTime()
		}
	default:
		return RunRecord{}, fmt.Errorf("decode run record: version %d: %w", ver, ErrNewer)
	}
	if err := d.finish(); err != nil {
		return RunRecord{}, fmt.Errorf("decode run record: %w", err)
	}
	return r, nil
}

// encodeJob writes jobV2, jobV3 for a job stopped by a stop of every job,
// or jobV4 for one that rests unable to run with a wait to go on: the
// version an older daemon reads where it can.
func encodeJob(j JobRecord) []byte {
	b := make([]byte, 0, 48+len(j.Name)+len(j.Fingerprint)+len(j.DoneFingerprint)+len(j.File))
	ver := byte(jobV2)
	switch {
	case j.WaitedFor != 0:
		ver = jobV4
	case j.StoppedAll:
		ver = jobV3
	}
	b = append(b, ver)
	b = appendString(b, j.Name)
	b = append(b, byte(j.State))
	b = appendString(b, j.Fingerprint)
	b = appendString(b, j.DoneFingerprint)
	b = binary.AppendVarint(b, int64(j.Restarts))
	b = appendTime(b, j.Changed)
	b = appendString(b, j.File)
	if ver >= jobV3 {
		stoppedAll := byte(0)
		if j.StoppedAll {
			stoppedAll = 1
		}
		b = append(b, stoppedAll)
	}
	if ver >= jobV4 {
		b = binary.AppendVarint(b, int64(j.WaitedFor))
	}
	return b
}

// decodeJob decodes a job record of any version; like decodeRun, it never
// panics.
func decodeJob(v []byte) (JobRecord, error) {
	d := decoder{b: v}
	var j JobRecord
	switch ver := d.readByte(); {
	case d.err != nil:
	case ver >= jobV1 && ver <= jobV4:
		j.Name = d.readString()
		j.State = State(d.readByte())
		j.Fingerprint = d.readString()
		j.DoneFingerprint = d.readString()
		j.Restarts = d.readInt()
		j.Changed = d.readTime()
		if ver >= jobV2 {
			j.File = d.readString()
		}
		if ver >= jobV3 {
			j.StoppedAll = d.readByte() == 1
		}
		if ver >= jobV4 {
			j.WaitedFor = time.Duration(d.readVarint())
		}
	default:
		return JobRecord{}, fmt.Errorf("decode job record: version %d: %w", ver, ErrNewer)
	}
	if err := d.finish(); err != nil {
		return JobRecord{}, fmt.Errorf("decode job record: %w", err)
	}
	return j, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendTime writes a flag byte (0: the zero time, which means "not
// yet"; 1: set), then Unix seconds and nanoseconds. The location is not
// kept: times come back in UTC.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// decoder reads a record front to back. The first problem sticks in
// err and every later read returns a zero value, so decoders read
// straight through and check once.
type decoder struct {
	b   []byte
	off int // bytes consumed, for messages
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", ErrCorrupt, what, d.off)
	}
	d.b = nil
}

func (d *decoder) advance(n int) {
	d.b = d.b[n:]
	d.off += n
}

func (d *decoder) readByte() byte {
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.advance(1)
	return c
}

func (d *decoder) readUvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.advance(n)
	return v
}

func (d *decoder) readVarint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.advance(n)
	return v
}

func (d *decoder) readInt() int {
	v := d.readVarint()
	if int64(int(v)) != v {
		d.fail("integer out of range")
		return 0
	}
	return int(v)
}

// count reads a slice length. Every element takes at least one byte, so a
// length beyond what is left is damage, and refusing it keeps a few bad
// bytes from making the decoder allocate gigabytes.
func (d *decoder) readCount() int {
	n := d.readUvarint()
	if n > uint64(len(d.b)) {
		d.fail("count beyond end")
		return 0
	}
	return int(n)
}

func (d *decoder) readString() string {
	n := d.readUvarint()
	if n > uint64(len(d.b)) {
		d.fail("string beyond end")
		return ""
	}
	s := string(d.b[:n])
	d.advance(int(n))
	return s
}

// minUnix and maxUnix bound the seconds a time may have: years 1
// to 9999, where time.Unix and Time.Unix round-trip.
const (
	minUnix = -62135596800
	maxUnix = 253402300799
)

func (d *decoder) readTime() time.Time {
	switch d.readByte() {
	case 0:
		return time.Time{}
	case 1:
		sec := d.readVarint()
		nsec := d.readUvarint()
		if d.err != nil {
			return time.Time{}
		}
		if sec < minUnix || sec > maxUnix || nsec >= 1e9 {
			d.fail("time out of range")
			return time.Time{}
		}
		return time.Unix(sec, int64(nsec)).UTC()
	default:
		d.fail("bad time flag")
		return time.Time{}
	}
}

// finish reports the first problem, or bytes left over: a record of a
// known version has an exact length, so extra bytes mean damage.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail(strconv.Itoa(len(d.b)) + " bytes left over")
	}
	return d.err
}
