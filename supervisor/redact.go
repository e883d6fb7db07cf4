package supervisor

import (
	"cmp"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/store"
)

// What a job file says is shown only to those who may read the file. A
// problem's sentence quotes the file (a syntax error names the token it
// stopped at; a bad value is quoted), and a job's why for a declaration
// that cannot run is such a sentence; everyone allowed on the socket sees
// the status, but not everyone may read every job file (an admin's 0600
// file, whatever a link pointed to). For those, the sentence is replaced by
// one that says where and what kind of problem it is, and how to see it.

// reader is who asks, as far as reading job files goes.
type reader struct {
	// all: root, the daemon's own user, or a member of the admin group
	// (who acts on every job, and is shown what it is): reads what the
	// daemon reads.
	all  bool
	uid  uint32
	gids map[uint32]bool
	// seen caches each file's answer for one request.
	seen map[string]bool
}

// readerOf is the caller of r, which authorize has let in (it refuses a
// caller it cannot name); one without credentials is shown nothing of a
// file's content.
func (d *Daemon) readerOf(r *http.Request) *reader {
	cred, ok := r.Context().Value(peerKey{}).(ctlsock.Peer)
	if !ok {
		return &reader{uid: ^uint32(0), gids: map[uint32]bool{}, seen: map[string]bool{}}
	}
	if rootOrDaemon(cred.Uid) || d.inAdminGroup(cred, nameOf(cred.Uid)) {
		return &reader{all: true}
	}
	return &reader{uid: cred.Uid, gids: groupsOf(cred), seen: map[string]bool{}}
}

// canRead reports whether the reader may read path: search every
// directory on the way, and read the file, by mode, owner and group (as the
// kernel would decide, ACLs aside).
func (rd *reader) canRead(path string) bool {
	if rd.all || path == "" {
		return true
	}
	if !rd.may(path, 0o4) {
		return false
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if !rd.may(dir, 0o1) {
			return false
		}
		if dir == "/" || dir == "." {
			return true
		}
	}
}

// may reports whether the reader has the permission bits perm (4 read, 1
// search) on path, remembering the answer for this request.
func (rd *reader) may(path string, perm uint32) bool {
	key := strconv.Itoa(int(perm)) + path
	if ok, seen := rd.seen[key]; seen {
		return ok
	}
	ok := false
	var st syscall.Stat_t
	if syscall.Stat(path, &st) == nil {
		switch {
		case st.Uid == rd.uid:
			ok = st.Mode&(perm<<6) != 0
		case rd.gids[st.Gid]:
			ok = st.Mode&(perm<<3) != 0
		default:
			ok = st.Mode&perm != 0
		}
	}
	rd.seen[key] = ok
	return ok
}

// detail returns a job's detail as the reader may see it: its definition
// and the environment of its next run are what its file says.
func (rd *reader) detail(jd JobDetail) JobDetail {
	jd.Status = rd.jobs([]JobStatus{jd.Status})[0]
	if rd.canRead(jd.Definition.File) {
		return jd
	}
	jd.Hidden = msgDefinitionHidden(jd.Definition.File)
	jd.Definition.Cmd = []string{}
	jd.Definition.Env = map[string]string{}
	jd.Definition.Description = ""
	// Where it runs is the file's too (trial AL: a why that quoted the
	// directory was hidden, the directory shown).
	jd.Definition.Dir = ""
	jd.NextEnv = []string{}
	jd.Runs = rd.runs(jd.Runs, func(string) string { return jd.Definition.File })
	return jd
}

// runs hides the cause of each run that could not start, where the
// reader may not read the file of its job (fileOf): the cause quotes it.
func (rd *reader) runs(rs []RunView, fileOf func(job string) string) []RunView {
	if rd.all {
		return rs
	}
	for i := range rs {
		if rs[i].Reason != store.ReasonSpawnError.String() || rs[i].Cause == "" {
			continue
		}
		if file := fileOf(rs[i].Job); file == "" || !rd.canRead(file) {
			rs[i].Cause = msgStartHidden(cmp.Or(file, "its job file"))
		}
	}
	return rs
}

// problems returns ps with the sentences about files the reader cannot
// read replaced.
func (rd *reader) problems(ps []Problem) []Problem {
	if rd.all {
		return ps
	}
	out := make([]Problem, len(ps))
	for i, p := range ps {
		readable := p.File
		if p.Code == ProblemFileRefused {
			// Why a file is refused (its mode, its owner, where a link
			// leads) is what a listing of its directory shows: whoever
			// may list it sees why, though the file itself may be
			// unreadable (a link to /etc/shadow).
			readable = filepath.Dir(p.File)
		}
		if !rd.canRead(readable) && p.Code != ProblemNotRecording && p.Code != ProblemOrphanKept && p.Code != ProblemDirRefused && p.Code != ProblemDirMissing && p.Code != ProblemLogsUnwritable {
			p.Text = msgHidden(p)
		}
		out[i] = p
	}
	return out
}

// status returns s as the reader may see it.
func (rd *reader) status(s Status) Status {
	if rd.all {
		return s
	}
	s.Problems = rd.problems(s.Problems)
	s.Errors = make([]string, len(s.Problems))
	for i, p := range s.Problems {
		s.Errors[i] = p.Text
	}
	s.Jobs = rd.jobs(s.Jobs)
	return s
}

// jobs hides the why of a job whose declaration cannot run or fit, when it
// comes from a file the reader cannot read: it quotes the file.
func (rd *reader) jobs(js []JobStatus) []JobStatus {
	if rd.all {
		return js
	}
	out := make([]JobStatus, len(js))
	for i, j := range js {
		switch {
		case (j.State == store.StateInvalid.String() || j.State == store.StateUnplaceable.String()) && !rd.canRead(j.File):
			j.Why = msgHidden(Problem{Code: j.State, File: j.File, Line: j.Line, Kind: "job", Job: j.Name})
		case strings.HasPrefix(j.Why, runsOn) && !rd.canRead(j.File):
			j.Why = runsOn + msgHidden(Problem{Code: store.StateInvalid.String(), File: j.File, Line: j.Line, Kind: "job", Job: j.Name})
		case strings.HasPrefix(j.Why, CannotStart) && !rd.canRead(j.File):
			j.Why = msgStartHidden(j.File)
		}
		out[i] = j
	}
	return out
}
