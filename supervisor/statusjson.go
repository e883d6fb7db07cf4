package supervisor

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// The answers of GET /v1/status and /v1/jobs are written here, and not by
// encoding/json's reflection, which was most of what such a call cost
// the daemon: 1 000 jobs are 280 KB of JSON. The bytes are encoding/json's
// own, HTML escaping and field order included (TestStatusJSONMatches,
// FuzzJobStatusJSON); the parts that are rare or small (cards, problems,
// dependencies, arrays) go through encoding/json still.

// writeStatus is writeJSON for a Status.
func writeStatus(w http.ResponseWriter, s Status) {
	e := jsonAppender{b: make([]byte, 0, 1024+400*len(s.Jobs))}
	e.status(&s)
	writeAppended(w, &e, s)
}

// writeJobs is writeJSON for a list of jobs.
func writeJobs(w http.ResponseWriter, jobs []JobStatus) {
	e := jsonAppender{b: make([]byte, 0, 16+400*len(jobs))}
	e.jobs(jobs)
	writeAppended(w, &e, jobs)
}

func writeAppended(w http.ResponseWriter, e *jsonAppender, v any) {
	if e.err != nil {
		// What encoding/json does with it, a time it cannot write above
		// all, is its own to say.
		writeJSON(w, http.StatusOK, v)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(e.b, '\n'))
}

// jsonAppender appends JSON to b; err is the first value it could not
// write, after which what b holds is not to be used.
type jsonAppender struct {
	b   []byte
	err error
}

func (e *jsonAppender) status(s *Status) {
	e.raw(`{"host":`)
	e.string(s.Host)
	e.raw(`,"machine":`)
	e.marshal(s.Machine)
	e.raw(`,"jobs":`)
	e.jobs(s.Jobs)
	e.raw(`,"errors":`)
	e.marshal(s.Errors)
	e.raw(`,"problems":`)
	e.marshal(s.Problems)
	e.raw(`,"counts":`)
	e.marshal(s.Counts)
	e.raw(`,"logs":`)
	e.string(s.Logs)
	e.raw(`,"runner":`)
	e.string(s.Runner)
	if s.CoresByAffinity {
		e.raw(`,"cores_by_affinity":true`)
	}
	e.raw(`,"now":`)
	e.time(s.Now)
	e.raw(`,"daemon":`)
	e.marshal(s.Daemon)
	e.b = append(e.b, '}')
}

func (e *jsonAppender) jobs(jobs []JobStatus) {
	if jobs == nil {
		e.raw("null")
		return
	}
	e.b = append(e.b, '[')
	for i := range jobs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.job(&jobs[i])
	}
	e.b = append(e.b, ']')
}

// job is a JobStatus in the order of its fields, each omitempty field
// left out where encoding/json leaves it out.
func (e *jsonAppender) job(j *JobStatus) {
	e.raw(`{"name":`)
	e.string(j.Name)
	e.raw(`,"owner":`)
	e.string(j.Owner)
	e.raw(`,"state":`)
	e.string(j.State)
	e.raw(`,"since":`)
	e.time(j.Since)
	if j.Why != "" {
		e.raw(`,"why":`)
		e.string(j.Why)
	}
	if j.Run != 0 {
		e.raw(`,"run":`)
		e.b = strconv.AppendUint(e.b, j.Run, 10)
	}
	if j.PID != 0 {
		e.raw(`,"pid":`)
		e.int(int64(j.PID))
	}
	e.raw(`,"cpus":`)
	e.int(int64(j.CPUs))
	e.raw(`,"cpu_ids":`)
	if j.CPUIDs == nil {
		e.raw("null")
	} else {
		e.b = append(e.b, '[')
		for i, id := range j.CPUIDs {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.int(int64(id))
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"gpus":`)
	if j.GPUs == nil {
		e.raw("null")
	} else {
		e.b = append(e.b, '[')
		for i, g := range j.GPUs {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.string(g)
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"ram_bytes":`)
	e.int(j.RAMBytes)
	e.raw(`,"gpu_mem_bytes":`)
	e.int(j.GPUMemBytes)
	if j.GPUMemUsedBytes != nil {
		e.raw(`,"gpu_mem_used_bytes":`)
		e.int(*j.GPUMemUsedBytes)
	}
	if j.GPUMemPeakBytes != nil {
		e.raw(`,"gpu_mem_peak_bytes":`)
		e.int(*j.GPUMemPeakBytes)
	}
	e.raw(`,"restarts":`)
	e.int(int64(j.Restarts))
	if j.GaveUp {
		e.raw(`,"gave_up":true`)
	}
	e.raw(`,"file":`)
	e.string(j.File)
	e.raw(`,"line":`)
	e.int(int64(j.Line))
	e.raw(`,"asked":`)
	e.size(&j.Asked)
	if j.Flavor != "" {
		e.raw(`,"flavor":`)
		e.string(j.Flavor)
	}
	if j.ExpectedStart != nil {
		e.raw(`,"expected_start":`)
		e.time(*j.ExpectedStart)
	}
	if j.QueuePosition != 0 {
		e.raw(`,"queue_position":`)
		e.int(int64(j.QueuePosition))
	}
	if j.RetryAt != nil {
		e.raw(`,"retry_at":`)
		e.time(*j.RetryAt)
	}
	if j.KillAt != nil {
		e.raw(`,"kill_at":`)
		e.time(*j.KillAt)
	}
	if j.RunsAgainAfter != "" {
		e.raw(`,"runs_again_after":`)
		e.string(j.RunsAgainAfter)
	}
	if j.Unrecorded {
		e.raw(`,"unrecorded":true`)
	}
	if j.Short != nil {
		e.raw(`,"short":`)
		e.size(j.Short)
	}
	if j.Quota != nil {
		e.raw(`,"quota":`)
		e.marshal(j.Quota)
	}
	if j.Used != nil {
		e.raw(`,"used":`)
		e.marshal(j.Used)
	}
	if len(j.After) > 0 {
		e.raw(`,"after":`)
		e.marshal(j.After)
	}
	if j.AfterLeftOut != 0 {
		e.raw(`,"after_left_out":`)
		e.int(int64(j.AfterLeftOut))
	}
	if j.Array != nil {
		e.raw(`,"array":`)
		e.marshal(j.Array)
	}
	e.b = append(e.b, '}')
}

func (e *jsonAppender) size(s *Size) {
	e.raw(`{"cpus":`)
	e.int(int64(s.CPUs))
	e.raw(`,"gpus":`)
	e.int(int64(s.GPUs))
	e.raw(`,"ram_bytes":`)
	e.int(s.RAMBytes)
	e.raw(`,"gpu_mem_bytes":`)
	e.int(s.GPUMemBytes)
	e.b = append(e.b, '}')
}

// raw appends s as it is: a key with its punctuation, or null.
func (e *jsonAppender) raw(s string) { e.b = append(e.b, s...) }

func (e *jsonAppender) int(n int64) { e.b = strconv.AppendInt(e.b, n, 10) }

// time is a time as Time.MarshalJSON writes it, without its allocation:
// RFC 3339 with nanoseconds, which it refuses for a year that is not four
// digits or a zone 24 hours or more away.
func (e *jsonAppender) time(t time.Time) {
	b := append(e.b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	switch {
	case b[n0+len("9999")] != '-':
		e.fail(errTimeRange)
	case b[len(b)-1] != 'Z':
		c, h := b[len(b)-len("Z07:00")], b[len(b)-len("07:00"):]
		if '0' <= c && c <= '9' || 10*(h[0]-'0')+h[1]-'0' >= 24 {
			e.fail(errTimeRange)
		}
	}
	e.b = append(b, '"')
}

// errTimeRange: a time encoding/json cannot write either; it is left to it.
var errTimeRange = errors.New("a time outside RFC 3339")

func (e *jsonAppender) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// marshal is v through encoding/json, as the whole answer once was.
func (e *jsonAppender) marshal(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		e.fail(err)
	}
	e.b = append(e.b, b...)
}

// string is s quoted as encoding/json quotes it with its HTML escaping
// on (json.Encoder's default): <, > and & as \u003c…, U+2028 and U+2029
// escaped, each byte of invalid UTF-8 as \ufffd.
func (e *jsonAppender) string(s string) {
	const hex = "0123456789abcdef"
	b := append(e.b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, `\b`...)
			case '\f':
				b = append(b, `\f`...)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	e.b = append(b, '"')
}
