package supervisor

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/store"
)

// This file is the catalog of the sentences the daemon writes: into API
// errors, into a job's why and into the status's errors. Every one says what
// is wrong and what to do next, naming the command that helps. What a
// client shows is worded by the client from the facts the daemon sends
// (codes, counts, times); the sentences here are for those who read the
// JSON or the journal, and the client reuses the ones it needs rather than
// writing them again. The golden test in messages_test.go pins them all.

// Codes of API errors: stable, so that a client branches on them and never
// on the sentence. Add, never rename.
const (
	CodeNoSuchJob    = "no_such_job"
	CodeNoSuchRun    = "no_such_run"
	CodeNoSuchCall   = "no_such_call"
	CodeNotPermitted = "not_permitted"
	CodeBadRequest   = "bad_request"
	CodeDisabled     = "disabled"       // a start of a job its file disables
	CodeInvalid      = "invalid"        // a start of a job whose declaration cannot run
	CodeUnplaceable  = "unplaceable"    // a start of a job that fits no machine
	CodeUnavailable  = "unavailable"    // the daemon's loop did not answer in time
	CodeStopping     = "stopping"       // the daemon is shutting down and takes no request
	CodeTooManyTails = "too_many_tails" // a caller's requests for last lines (logs -n) under way are at their bound
	CodeInternal     = "internal"
	CodeIsArray      = "is_array"  // a call about one job (its logs) names an array: name an index
	CodeNotArray     = "not_array" // a call about an array's indices (restart --failed) names a job that is not one
	CodeRemoved      = "removed"   // a start or restart of a job no file declares any more, its run still being stopped
	// CodeTooManyConnections: the connection was over the control
	// socket's caps (429 for the user's own, 503 for all users'), and
	// was closed after this answer.
	CodeTooManyConnections = "too_many_connections"
)

// Codes of problems that are not a job file's own mistakes (those take
// luaapi's Problem names, e.g. "unknown_field").
const (
	ProblemFileRefused    = "file_refused"    // owner, mode or type of a file
	ProblemDirRefused     = "dir_refused"     // the jobs directory itself
	ProblemDirMissing     = "dir_missing"     // no jobs directory (yet)
	ProblemNameTaken      = "name_taken"      // a name another file in force declares
	ProblemTooManyJobs    = "too_many_jobs"   // a person's files would declare more jobs than --person-jobs
	ProblemNotRecording   = "not_recording"   // the state cannot be written
	ProblemCredentials    = "credentials"     // an unknown user or group
	ProblemStateGone      = "state_gone"      // the state file was removed or replaced under the daemon
	ProblemLogsUnwritable = "logs_unwritable" // the jobs' log directory cannot be written: their output is thrown away
	ProblemUnplaceable    = "unplaceable"     // a job that fits no machine (berth check; the daemon says it as the job's state)
	ProblemOrphanKept     = "orphan_kept"     // a run taken back at start that no file in force declares, kept while a file that may declare it has errors
)

// msgNotLoadedYet says no job is named name yet: the daemon has not
// read its job files at start.
func msgNotLoadedYet(name string) string {
	return fmt.Sprintf("no job named %q yet: the daemon is still reading its job files, as it does at start (berth status says once it has; ask again then)", name)
}

// msgNoSuchJob says no job is named name, and the name near it that the
// caller may have meant ("" for none); brokenFiles is how many job files'
// latest versions are refused (one of them may declare it).
func msgNoSuchJob(name, meant string, brokenFiles int) string {
	lists := "berth jobs lists them"
	if meant != "" {
		lists = fmt.Sprintf("did you mean %q? %s", meant, lists)
	}
	switch brokenFiles {
	case 0:
		return fmt.Sprintf("no job named %q (%s)", name, lists)
	case 1:
		return fmt.Sprintf("no job named %q (%s; a job file has errors, and what it declares anew is not in force until they are fixed: berth status shows them)", name, lists)
	}
	return fmt.Sprintf("no job named %q (%s; %d job files have errors, and what they declare anew is not in force until they are fixed: berth status shows them)", name, lists, brokenFiles)
}

// msgStopping is why a job is stopping: what asked for it, and the signal
// sent. The client adds when the SIGKILL comes (JobStatus.KillAt).
func msgStopping(why, signal string) string {
	return fmt.Sprintf("%s; %s sent", why, signal)
}

// msgStoppedOutside is the cause of a run whose unit someone stopped
// with systemd, not berth.
const msgStoppedOutside = "its unit was stopped outside berth (systemctl stop of it, or of berth.slice)"

// msgGoneWhileAway is the cause of a run whose unit was gone before a
// daemon took it back: stopped outside berth, or failed and its result
// cleared since; which, and how it ended, is not known.
func msgGoneWhileAway(unit string) string {
	return "its unit was gone when berth came back: stopped outside berth (systemctl stop of it, or of berth.slice), or failed with its result cleared (systemctl reset-failed); how it ended is not known (journalctl -u " + QuoteArg(unit) + " may say)"
}

// msgStoppingSent is msgStopping of a stop whose signal the last daemon
// sent.
func msgStoppingSent(why, signal string) string {
	return fmt.Sprintf("%s; %s sent by the daemon before this one", why, signal)
}

// msgThenAfterStop is why, the stop under way, with what a person asked
// meanwhile: a stop (it rests stopped once the run has ended), or a start
// or a restart (runs, which says which: it runs again then).
//
// stopAsked: the stop under way is a person's stop, after which the job
// rests stopped already.
func msgThenAfterStop(why, runs string, stopAsked bool) string {
	why, _, _ = strings.Cut(why, "; then ")
	switch {
	case runs != "":
		return why + "; then " + runs + ": it runs again once this run has ended"
	case stopAsked:
		return why
	}
	return why + "; then " + msgStopRequested + ": it rests stopped once this run has ended"
}

// msgStartRequested and msgRestartRequested are a person's start and
// restart, asked while a stop is under way (msgThenAfterStop).
const (
	msgStartRequested   = "started on request (berth start)"
	msgRestartRequested = "restarted on request (berth restart)"
)

// msgStopRequested is why a person's stop (berth stop) stops a run.
const msgStopRequested = "stopped on request (berth stop)"

// msgAfterRemoved is why a job declared again waits: the job of its name,
// removed a moment ago, is still stopping its run.
const msgAfterRemoved = "declared again while its run from before, its file removed, is still being stopped; it starts once that run has ended"

// msgOrphanKept says why a run taken back at start goes on though no job
// file in force declares its job, and how it ends.
func msgOrphanKept(name string, run uint64) string {
	return fmt.Sprintf("job %q: its run %d goes on, holding what it was granted, though no job file in force declares the job: a file with errors may declare it. Once those files are fixed or removed (berth status lists their errors), the job they declare of that name takes the run back, or it is stopped; berth stop %s stops it at once",
		name, run, QuoteArg(name))
}

// MsgRunsKept counts the runs kept though no file in force declares
// their jobs (ProblemOrphanKept), for the status line and berth status.
func MsgRunsKept(n int) string {
	if n == 1 {
		return "1 run of a job no file declares"
	}
	return accounting.Count(n, "run") + " of jobs no file declares"
}

// msgNoJobRunKept is msgNoSuchJob for a name whose run, taken back at
// the daemon's start, goes on though no file in force declares its job.
func msgNoJobRunKept(name string) string {
	return fmt.Sprintf("no job named %q is declared now, but a run of it taken back at the daemon's start goes on: a job file with errors may declare it (berth status shows the run and the errors; berth stop %s stops it)", name, QuoteArg(name))
}

// msgJobGone is msgNoSuchJob for a job the state remembers: its file
// went away (a run of it going then was stopped), and its runs, if it
// ran, are still there.
func msgJobGone(name string, ran bool) string {
	if !ran {
		return fmt.Sprintf("no job named %q now: no job file declares it any more, and it never ran (berth jobs lists the jobs there are)", name)
	}
	return fmt.Sprintf("no job named %q now: no job file declares it any more (a run of it still going when its file went was stopped); berth history %s shows its runs", name, QuoteArg(name))
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// QuoteArg writes one word of a command the way a shell reads it back:
// as it is where it is safe, else in single quotes ("'train[3]'", which
// zsh would otherwise take for a pattern).
func QuoteArg(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// msgRunsAgainAfter is a done job's why while a job upstream of it runs
// a new definition (JobStatus.RunsAgainAfter), or rests (state) before
// that has ended done.
// msgDoneUnrecorded is the why of a job done whose record is not on disk.
const msgDoneUnrecorded = "done, but not yet recorded: the state directory cannot be written (berth status says why); should the daemon stop before it can, the job runs again"

func msgRunsAgainAfter(upstream string, state store.State, declared bool) string {
	if !declared {
		// Run past it (berth start --ignore-deps) while no file declared
		// it (trial AV: said "it is new", and sent to berth show of it).
		return fmt.Sprintf("runs again after %s once a job file declares %s and it succeeds: its output is out of date until then (no job file declares %s now; berth status shows the files' errors)",
			upstream, upstream, upstream)
	}
	if !Holds(state) && state != store.StateWaiting && state != store.StateBackoff {
		// It rests short of done: what it takes is the upstream job's to
		// say (a definition of it that never succeeded, or a new one).
		help := "berth show " + QuoteArg(upstream) + " says why"
		switch state {
		case store.StateFailed:
			help = "berth logs " + QuoteArg(upstream) + " shows why; berth start " + QuoteArg(upstream) + " runs it again"
		case store.StateStopped:
			help = "berth start " + QuoteArg(upstream) + " starts it"
		}
		return fmt.Sprintf("runs again after %s once %s succeeds (%s): its output is out of date until then (%s)",
			upstream, upstream, stateSentence(state), help)
	}
	return fmt.Sprintf("runs again after %s, which runs again first: its output is out of date until then (berth show %s says why)", upstream, QuoteArg(upstream))
}

// msgSocketTaken: another file is at the control socket's path now.
func msgSocketTaken(path string) string {
	return fmt.Sprintf("another file is at the control socket's path %s now: clients reach it, not this daemon; remove it (ls -l %s says whose it is), and the daemon binds its socket there again within %s, or on systemctl reload berth", path, path, socketCheckEvery)
}

// msgSocketNotBound: the control socket's path was removed, and binding
// it again failed.
func msgSocketNotBound(path string, err error) string {
	return fmt.Sprintf("the control socket %s was removed, and cannot be bound again (%v): no client reaches the daemon; the daemon tries again every %s and on systemctl reload berth", path, err, socketCheckEvery)
}

// msgRemovedStopping refuses a start or restart (verb) of a job no job
// file declares any more while its run is being stopped.
func msgRemovedStopping(verb, name, file string) string {
	return fmt.Sprintf("cannot %s %s: no job file declares it any more (%s declared it), and its run is being stopped; declare it again in a job file to run it (berth check FILE checks it)", verb, name, file)
}

func msgNoSuchIndex(array string, i int, r luaapi.Range) string {
	return fmt.Sprintf("array %s has no index %d: its indices are %d to %d (berth show %s lists them)", array, i, r.From, r.To, array)
}

func msgLogsOfArray(array string, r luaapi.Range) string {
	return fmt.Sprintf("%s is an array: each index has its own output; name one, e.g. berth logs %s --index %d (its indices are %d to %d; berth show %s lists them by state)",
		array, array, r.From, r.From, r.To, array)
}

func msgNotArray(job string) string {
	return fmt.Sprintf("%s is not an array: only an array's failed indices are restarted alone; nothing was restarted (berth restart %s restarts the job itself)", job, QuoteArg(job))
}

func msgNotArrayIndex(job string, i int) string {
	return fmt.Sprintf("%s is not an array, so it has no index %d (berth show %s shows the job itself)", job, i, QuoteArg(job))
}

func msgNoSuchCall(method, path string) string {
	return "no such call: " + method + " " + path + " (the daemon speaks " + APIVersion + ")"
}

func msgWrongMethod(method, path string, allow []string) string {
	return "no such call: " + method + " " + path + "; " + path + " takes " + strings.Join(allow, " or ")
}

func msgBadRunCount(v string) string {
	return "n must be a whole number of runs, 1 or more, got " + strconv.Quote(v)
}

func msgCannotReadHistory(err error) string { return "cannot read the history: " + err.Error() }

func msgNoAnswer(err error) string { return "the daemon did not answer: " + err.Error() }

func msgTooManyTails(limit int) string {
	return fmt.Sprintf("you have %d requests for the last lines of a job's output under way, as many as one person may; ask again once one has ended (berth logs JOB without -n streams it all)", limit)
}

// MsgStopping refuses a request made while the daemon shuts down; what,
// where known, is the request ("berth stop train"; the client says it of
// berth stop --all, which asks of several jobs).
func MsgStopping(what string) string {
	if what != "" {
		what = ": " + what + " was not done"
	}
	return "the daemon is stopping, and takes no request now" + what + "; ask again once it has started again (systemctl status berth shows when)"
}

func msgNotPermitted(uid uint32, group, adminGroup string) string {
	return fmt.Sprintf("uid %d may not use this berth daemon: it answers root, its own user and the groups %s and %s (sudo usermod -aG %s $USER, then log in again)", uid, group, adminGroup, group)
}

// msgNotYours refuses what a caller asked of a job that is not theirs:
// act is what they asked, "stop it" or "read its output"; adminGroup is
// "" where the admin group does not exist.
func msgNotYours(job, owner, act, adminGroup string) string {
	admins := "a member of " + adminGroup
	if adminGroup == "" {
		admins = "root"
	}
	if owner == "" {
		if adminGroup != "" {
			admins = "root or " + admins
		}
		return fmt.Sprintf("%s is an administrators' job; only %s can %s (berth status shows each job's owner)", job, admins, act)
	}
	return fmt.Sprintf("%s belongs to %s; only %s or %s can %s", job, owner, owner, admins, act)
}

// msgFirstInLine names the job first in the placer's queue, which a job
// that would fit waits behind: its start is held for it.
func msgFirstInLine(job string) string {
	return fmt.Sprintf("%s is first in line (berth show %s says what it waits for)", job, QuoteArg(job))
}

// msgJobsDirMissing says the jobs directory does not exist: a typo in
// --jobs, one not made yet, or one gone a moment (held: what was in force
// from it stays).
func msgJobsDirMissing(dir string, held bool) string {
	if !held {
		return fmt.Sprintf("jobs directory %s does not exist, so no job of it runs; berth reads it as soon as it exists (mkdir %s, or give the daemon --jobs DIR)", dir, dir)
	}
	return fmt.Sprintf("jobs directory %s does not exist; what was in force from it stays in force, and berth reads it as soon as it exists (mkdir %s, or give the daemon --jobs DIR)", dir, dir)
}

func msgBadLineCount(v string) string {
	return "lines must be a whole number, 0 or more, got " + strconv.Quote(v)
}

func msgBadRun(v string) string {
	return fmt.Sprintf("run %q is not a run number (berth history JOB lists them)", v)
}

func msgNoSuchRun(job string, run uint64) string {
	return fmt.Sprintf("job %s has no run %d among its last 100 (berth history %s lists them)", job, run, QuoteArg(job))
}

func msgNoJournalctl(err error) string {
	return fmt.Sprintf("cannot read the journal: %v (the daemon runs journalctl to read it; install systemd's journalctl)", err)
}

func msgJournalctlFailed(err error, stderr string) string {
	return fmt.Sprintf("journalctl failed: %v: %s (journalctl -u berth may say more)", err, firstLine(stderr))
}

// msgCheckRequestTooLarge refuses a check's request past its bound of
// limit bytes (trial AL: "request body too large" named none).
func msgCheckRequestTooLarge(limit, fileLimit int) string {
	return fmt.Sprintf("the files to check are too large: a check's request may be %s at most, each job file %s (check or submit fewer files at once)",
		accounting.FormatSize(int64(limit)), accounting.FormatSize(int64(fileLimit)))
}

func msgBadCheck(err error) string {
	return fmt.Sprintf("the files to check could not be read: %v (berth submit and berth edit send them)", err)
}

func msgCheckTooLarge(name string, size, limit int) string {
	return fmt.Sprintf("%s is %d bytes, over the %d a job file may have: the daemon would not read it (split it into several files)", name, size, limit)
}

func msgBadFileName(name string, limit int) string {
	return fmt.Sprintf("%q is not a job file's name: it must end in .lua, not start with a dot, name no directory, hold no NUL byte, and be at most %d bytes long", name, limit)
}

// msgNoJobsDir says why someone cannot submit job files.
func msgNoJobsDir(user, group string) string {
	return fmt.Sprintf("%s has no job directory on this daemon: its people are the members of the group %s (sudo usermod -aG %s %s, then log in again)", cmp.Or(user, "this user"), group, group, cmp.Or(user, "$USER"))
}

// msgEnvHidden says why berth show leaves a job's environment out.
func msgEnvHidden(job, owner, adminGroup string) string {
	if owner == "" {
		return fmt.Sprintf("the environment of %s is shown only to root and the members of %s", job, adminGroup)
	}
	return fmt.Sprintf("the environment of %s is shown only to %s, root and the members of %s", job, owner, adminGroup)
}

// msgTooManyConnections says why a connection to the control socket was
// refused, and what frees one.
func msgTooManyConnections(r ctlsock.Refusal) string {
	if r.Total {
		return fmt.Sprintf("too many connections: the berth daemon holds %d, the most it takes from all users; try again in a few seconds (sudo ss -xp | grep berth shows who holds them; root can still connect)", r.Limit)
	}
	return fmt.Sprintf("too many connections: uid %d holds %d open to the berth daemon, the most one user may; a program keeps them open (ss -xp | grep berth finds it): try again once it has closed some", r.UID, r.Open)
}

// msgRefused says why a start or restart was refused; detail is what
// makes the job invalid, or how it fits no machine, or where it is
// disabled.
func msgRefused(verb, job string, r refusal, detail string) string {
	why := "it is disabled: " + detail
	switch r {
	case refuseInvalid:
		why = "its declaration cannot run: " + detail
	case refuseUnplaceable:
		why = "it cannot be placed, and would be found so again at once: " + detail
	}
	return fmt.Sprintf("cannot %s job %q: %s", verb, job, why)
}

// msgDisabledAt says where a job is disabled, and what enables it: for a
// person's job, berth edit; the daemon reloads a saved file by itself.
func msgDisabledAt(pos luaapi.Pos, job string, person bool) string {
	fix := "set it to true there, and the daemon reloads the file once it is saved"
	if owner, name, ok := strings.Cut(job, "/"); ok && person {
		fix = "berth edit " + name + " sets it to true, as " + owner
	}
	return fmt.Sprintf("%s says enabled = false (%s)", posString(pos), fix)
}

// MsgUnplaceable says a job fits no machine; berth check says it too.
// flavor is the job's flavor, "" for none: what it asks is the flavor's,
// declared elsewhere (berth flavors shows where).
func MsgUnplaceable(pos luaapi.Pos, job, flavor string, err *accounting.UnplaceableError) string {
	return msgUnplaceableAt(pos, job, flavor, luaapi.Pos{}, err)
}

// msgUnplaceableAt is MsgUnplaceable where the flavor is declared at
// flavorAt, which it names (zero: not known).
func msgUnplaceableAt(pos luaapi.Pos, job, flavor string, flavorAt luaapi.Pos, err *accounting.UnplaceableError) string {
	subject := fmt.Sprintf("job %q", job)
	flavors := ""
	switch {
	case flavor != "" && flavorAt.File != "":
		// Where berth check found it, which may be no daemon's (trial
		// AJ: berth flavors did not list it).
		subject += fmt.Sprintf(", by its flavor %q,", flavor)
		flavors = "; " + flavor + " is declared at " + posString(flavorAt)
	case flavor != "":
		subject += fmt.Sprintf(", by its flavor %q,", flavor)
		flavors = "; berth flavors shows where " + flavor + " is declared"
	}
	if err.Quota != nil {
		// Not the machine: the owner's quota, which the administrators set.
		return fmt.Sprintf("%s%s %v (quotas are the administrators', declared in their job files; berth status --owner %s shows what %s's jobs hold%s)",
			posPrefix(pos), subject, err, err.Owner, err.Owner, flavors)
	}
	return fmt.Sprintf("%s%s %v (berth machine shows what it has%s)", posPrefix(pos), subject, err, flavors)
}

// MsgQuotaNoAccount says a quota names no account: the person it was
// meant for has none (suggest: a person it may have meant, or "").
func MsgQuotaNoAccount(pos luaapi.Pos, name, suggest string) string {
	if suggest != "" {
		return fmt.Sprintf("%squota %q names no account (did you mean %q?); a quota names a person by their login, or \"*\" for everyone else", posPrefix(pos), name, suggest)
	}
	return fmt.Sprintf("%squota %q names no account (getent passwd %s finds none); a quota names a person by their login, or \"*\" for everyone else", posPrefix(pos), name, name)
}

// MsgCredentials says a job names a user or group that does not exist;
// berth check says it too.
func MsgCredentials(pos luaapi.Pos, job string, err error) string {
	return posPrefix(pos) + "job " + strconv.Quote(job) + ": " + err.Error()
}

// CannotStart begins the why of a job whose last run could not be
// started; what follows quotes its definition (a program, a directory).
const CannotStart = "cannot start: "

// runsOn begins the why of a running job whose declaration stopped
// being runnable: what follows quotes its file.
const runsOn = "its run goes on, but it will not run again: "

// msgIndicesRunOn is msgRunsOn for an array whose running indices'
// declaration cannot run any more, or fits no machine.
func msgIndicesRunOn(why string) string {
	return "its running indices go on, but will not run again: " + why
}

// msgOOMWhy is the why of a job whose last run went over its memory:
// what ended it, and what to do (trial AW: it said the first alone).
func msgOOMWhy(ended string) string {
	return ended + " (raise its ram, or make it use less)"
}

// msgRunsEarlierDefinition is the why of a job whose run started from an
// earlier definition (on_change = "finish"): the new one applies from its
// next run, which a service, never ending, does not come to by itself.
func msgRunsEarlierDefinition(job string, service bool) string {
	if service {
		return "runs an earlier definition (on_change = \"finish\"), and a service's run may not end by itself: berth restart " + QuoteArg(job) + " applies the new one"
	}
	return "runs an earlier definition (on_change = \"finish\"); the new one applies from its next run (berth restart " + QuoteArg(job) + " applies it now)"
}

// msgRunsOn is the why of a running job whose declaration cannot run any
// more (invalid: a flavor or a parent removed, a user gone): its run,
// placed and started while it could, is not killed for it.
func msgRunsOn(invalid string) string {
	return runsOn + invalid
}

// msgCannotStart is the why of a job whose last run could not be started;
// cause is the spawn's error, as the run's record keeps it.
func msgCannotStart(job, cause string) string {
	return fmt.Sprintf("%s%s (berth show %s shows its command, directory and user)", CannotStart, cause, QuoteArg(job))
}

// msgStartHidden stands for why a job could not start, to one who may not
// read the file that declares it: the cause quotes it.
func msgStartHidden(file string) string {
	return fmt.Sprintf("cannot start; the cause quotes %s, which you may not read (its owner sees it: berth status)", file)
}

// msgSpawnErrorGone is a failed job's why after a restart of the daemon,
// when its last run could not be started and its record has no cause: one
// written before causes were kept.
func msgSpawnErrorGone(job string) string {
	return fmt.Sprintf("could not be started; the daemon's log says why (berth show %s shows its command, directory and user)", QuoteArg(job))
}

func msgNameTaken(at luaapi.Pos, kind, name string, other luaapi.Pos) string {
	return fmt.Sprintf("%s%s %q is already declared in %s, which is in force; this file is not loaded until one of them is renamed",
		posPrefix(at), kind, name, posString(other))
}

// msgOfVersionInForce marks a problem of the version of a file kept in
// force while the file on disk has errors: its line is that version's.
func msgOfVersionInForce(text string) string {
	return text + " (in the version in force, kept while the file on disk has errors: its lines may differ)"
}

// msgTooManyJobs refuses a person's file that would make their files
// declare more jobs than bound.
func msgTooManyJobs(path, owner string, n, others, bound int) string {
	return fmt.Sprintf("%s: declares %s (an array counts each index), and %s's other files in force %d; one person's files may declare %d in all, so this file is not loaded until that fits (remove jobs or files, or ask an administrator to raise berth daemon --person-jobs)",
		path, accounting.Count(n, "job"), owner, others, bound)
}

func msgTooManyDeps(path, owner string, deps, others int) string {
	return fmt.Sprintf("%s: its jobs name %d jobs in after and after_any (an array's once for each index), and %s's other files in force %d; one person's may name %d in all, so this file is not loaded until that fits (run jobs after an array, or after one job that runs after the others)",
		path, deps, owner, others, personDependencies)
}

func msgTooManyBytes(path, owner string, bytes, others int) string {
	return fmt.Sprintf("%s: its jobs' definitions take %s of the daemon's memory, and those of %s's other files in force %s; one person's may take %s in all, so this file is not loaded until that fits (pass what is long in a file, or remove jobs)",
		path, accounting.FormatSize(int64(bytes)), owner, accounting.FormatSize(int64(others)), accounting.FormatSize(int64(personDefinitionBytes)))
}

func msgNoCredentials() string {
	return "the daemon cannot tell who is calling (no peer credentials on the control socket); it answers only callers it can name: connect over its unix socket (berth status)"
}

// msgDefinitionHidden says why a job's definition is not shown.
func msgDefinitionHidden(file string) string {
	return fmt.Sprintf("its definition is in %s, which you may not read (its owner sees it: berth show, or the file itself)", file)
}

// msgHidden stands for a problem's sentence, or a job's why, shown to one
// who may not read the file it quotes.
func msgHidden(p Problem) string {
	at := posString(luaapi.Pos{File: p.File, Line: p.Line})
	what := strings.ReplaceAll(p.Code, "_", " ")
	if p.Job != "" {
		// What the name is of: a problem that does not say is taken
		// to be about a name.
		return fmt.Sprintf("%s: %s %q: a problem (%s) whose details quote a file you may not read (its owner sees them: berth status, or berth check %s)",
			at, cmp.Or(p.Kind, "name"), p.Job, what, p.File)
	}
	return fmt.Sprintf("%s: a problem (%s) whose details quote a file you may not read (its owner sees them: berth status, or berth check %s)", at, what, p.File)
}

// MsgNotRecording is the status's first error while the state cannot be
// written.
func MsgNotRecording(dir string, err error) string {
	return fmt.Sprintf("cannot record the state (%v): jobs go on, but what they do is not on disk until it can be: should the daemon stop first, a job shown done meanwhile runs again at its next start; %s", err, stateFix(dir, err))
}

// msgHeldForShutdown is why a job waits while the machine shuts down
// (Daemon.holdWhileShuttingDown).
const msgHeldForShutdown = "the machine is shutting down: no job starts until it is back (or the shutdown is called off)"

// Why a run was lost, as its record keeps it (berth history shows it
// after "lost: "); the job runs again.
const (
	msgLostWithDaemon   = "the daemon went away while it ran, and the run with it, at a time not known (its end is when the next daemon found it); the job runs again"
	msgLostLeftovers    = "the daemon went away while it ran; the next daemon stopped what was left of it (its end), and the job runs again"
	msgLostShuttingDown = "the machine was shutting down, and systemd stopped its unit with every other; the job runs again once the machine is back (or the shutdown is called off)"
	msgLostWithMachine  = "the machine went down while it ran (its end is the next boot); the job runs again"
	msgLostUnit         = "the next daemon could not take its unit back; the job runs again"
	msgLostUnrecorded   = "the daemon went away as it started the run, before its record was written; the job runs again"
)

// msgLogsUnwritable is the status's error while the jobs' log directory
// cannot take a run's output.
func msgLogsUnwritable(dir string, err error) string {
	return fmt.Sprintf("the jobs' log directory %s cannot be written (%v): jobs run, but their output is thrown away until it can be; it must be a directory the daemon may write in (ls -ld %s; lsattr -d %s)", dir, err, dir, dir)
}

// stateSentence is a job at rest short of done, as a clause: "it failed".
func stateSentence(s store.State) string {
	switch s {
	case store.StateFailed:
		return "it failed"
	case store.StateStopped:
		return "it was stopped"
	}
	return "it is " + s.String()
}

// msgOutputCut: the output of a run of job, in the log directory dir, was
// cut short at at by err (a full disk).
func msgOutputCut(job, dir string, at time.Time, err error, others []string) string {
	also := ""
	if len(others) > 0 {
		also = " (and the last runs of " + someNames(others) + ")"
	}
	return fmt.Sprintf("the output of a run of %s was cut short at %s%s: %v; jobs run, but what their log files cannot take is lost (df -h %s shows the space left; berth logs %s shows what was kept; this clears for a job once a run of it writes its output whole)",
		job, at.Format(time.DateTime), also, err, dir, job)
}

// msgUnrecordedAtStop: the daemon stopped with what a full disk kept it
// from writing still unwritten.
func msgUnrecordedAtStop(dir string, u *store.UnrecordedError) string {
	return fmt.Sprintf("stopped without recording the state: the last states of %s and %s are lost; the next start goes by what is on disk, so a job shown done since runs again, and a run begun since may be missing from the history; %s before berth starts again",
		accounting.Count(len(u.Jobs), "job"), accounting.Count(u.Runs, "write")+" of runs", stateFix(dir, u.Err))
}

// stateFix is what to do about a state directory the daemon cannot write
// in, for why it cannot.
func stateFix(dir string, err error) string {
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Sprintf("mount the file system of %s writable again (findmnt -T %s)", dir, dir)
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return fmt.Sprintf("let the daemon write in %s again (ls -la %s; lsattr %s)", dir, dir, dir)
	}
	return fmt.Sprintf("free space under %s (df -h %s)", dir, dir)
}

// MsgStateGone is the status's first error while the state file the
// daemon has open is no longer at its path.
func MsgStateGone(g *store.GoneError, pid int) string {
	if g.Replaced {
		return fmt.Sprintf("state file %s was replaced by another file while the daemon runs: the daemon goes on recording into the file it opened, which is lost when it stops, and the next start reads the file now there (put the old one back if this was not meant; systemctl restart berth takes up the new one, and should be soon where the new one is a copy of the file removed, as what is recorded until then is lost)", g.Path)
	}
	return fmt.Sprintf("state file %s was removed while the daemon runs: if it was moved, move it back (this error then clears); otherwise it is lost when the daemon stops, and its next start begins an empty state: batch jobs done before run again, jobs stopped with berth stop start again, and the history and run ids begin anew. Until the daemon stops, the file it has open can be copied back, then the daemon restarted at once, which reads the copy (what it records in between is lost): ls -l /proc/%d/fd shows the file, \"(deleted)\"; cp /proc/%d/fd/N %s, then restart the daemon (systemctl restart berth, or as it was started)", g.Path, pid, pid, g.Path)
}

// msgStateGoneShort says it in systemd's status line.
func msgStateGoneShort(g *store.GoneError) string {
	if g.Replaced {
		return "state file replaced (berth status)"
	}
	return "state file removed (berth status)"
}

// msgBinaryReplacedShort says in systemd's status line that the daemon's
// binary was replaced: an upgrade is not in force until a restart, which
// stops the jobs only where they are the daemon's own children.
func msgBinaryReplacedShort(runner string) string {
	if runner == "units" {
		return "binary replaced: systemctl restart berth runs the new one; the jobs go on"
	}
	return "binary replaced: systemctl restart berth runs the new one, and stops the jobs"
}

// MsgShort says what a waiting job is short of, from what it asks and its
// shortfall: "needs 2 gpus; 1 free". A job short of nothing waits its turn.
func MsgShort(asked, short Size) string {
	var parts []string
	if short.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("needs %s; %d free", accounting.Count(asked.GPUs, "gpu"), asked.GPUs-short.GPUs))
	}
	if short.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("needs %s; %d free", accounting.Count(asked.CPUs, "core"), asked.CPUs-short.CPUs))
	}
	if short.GPUMemBytes > 0 {
		parts = append(parts, fmt.Sprintf("needs %s of one gpu's memory; %s the most free on one", accounting.FormatSize(asked.GPUMemBytes),
			accounting.FormatSize(asked.GPUMemBytes-short.GPUMemBytes)))
	}
	if short.RAMBytes > 0 {
		parts = append(parts, fmt.Sprintf("needs %s memory; %s free", accounting.FormatSize(asked.RAMBytes),
			accounting.FormatSize(asked.RAMBytes-short.RAMBytes)))
	}
	if len(parts) == 0 {
		return "queued behind a job ahead of it"
	}
	// One separator (trial AJ: "needs 1 cpu; 0 free, needs 10G …").
	return strings.Join(parts, "; ")
}

// CardsWorth is what the cards q.Held holds whole and its shares come to
// in cards, a share counting as its part of a card of q.CardBytes
// (known), rounded down to a hundredth: "0.83".
func CardsWorth(q QuotaView) string {
	worth := float64(q.Held.GPUs) + float64(q.Held.GPUMemBytes)/float64(q.CardBytes)
	return strconv.FormatFloat(math.Floor(worth*100)/100, 'f', -1, 64)
}

// MsgQuotaWait says why a person's job waits with the machine free enough:
// it would take its owner past their quota. "alice holds 2 of their 2 cards
// (quota)": each resource the quota holds back is named. The daemon
// writes it, and berth status words it again from the facts.
func MsgQuotaWait(owner string, q QuotaView, asked Size) string {
	// Each resource it would take them past: also one it does not ask
	// for, which they hold more of than a quota lowered since allows.
	var parts []string
	if l := q.Quota.GPUs; l >= 0 && q.Held.GPUs+asked.GPUs > l {
		parts = append(parts, fmt.Sprintf("%d of their %s", q.Held.GPUs, accounting.Count(l, "card")))
	}
	if l := q.Quota.GPUMemBytes; l >= 0 && q.Held.GPUMemBytes+asked.GPUMemBytes > l {
		parts = append(parts, fmt.Sprintf("%s of their %s of gpu memory", accounting.FormatSize(q.Held.GPUMemBytes), accounting.FormatSize(l)))
	}
	if l := q.Quota.GPUs; l >= 0 && q.Quota.GPUMemBytes < 0 && (asked.GPUMemBytes > 0 || asked.GPUs > 0 && q.Held.GPUMemBytes > 0) &&
		q.Held.GPUs+asked.GPUs <= l {
		// Shares count against gpus, a card's worth of memory as a card:
		// those asked for, or those held beside whole cards asked for.
		part := fmt.Sprintf("%d of their %s, and %s of gpu memory in shares", q.Held.GPUs, accounting.Count(l, "card"),
			accounting.FormatSize(q.Held.GPUMemBytes))
		if q.CardBytes > 0 {
			// What the shares come to, or "0 of their 1 card" reads as
			// room (trials AJ, AR).
			part = fmt.Sprintf("%s of their %s in all: %d whole, and %s of gpu memory in shares, every %s counting as a card",
				CardsWorth(q), accounting.Count(l, "card"), q.Held.GPUs, accounting.FormatSize(q.Held.GPUMemBytes), accounting.FormatSize(q.CardBytes))
		}
		parts = append(parts, part)
	}
	if l := q.Quota.CPUs; l >= 0 && q.Held.CPUs+asked.CPUs > l {
		parts = append(parts, fmt.Sprintf("%d of their %s", q.Held.CPUs, accounting.Count(l, "core")))
	}
	if l := q.Quota.RAMBytes; l >= 0 && q.Held.RAMBytes+asked.RAMBytes > l {
		parts = append(parts, fmt.Sprintf("%s of their %s memory", accounting.FormatSize(q.Held.RAMBytes), accounting.FormatSize(l)))
	}
	if len(parts) == 0 {
		parts = append(parts, "all their quota allows")
	}
	return fmt.Sprintf("%s holds %s (quota; berth status --owner %s shows their jobs)", owner, strings.Join(parts, ", "), owner)
}

// MsgEnded says how a run ended, for a job's why: "exit 3", "killed by
// SIGSEGV", "timed out after 12h".
func MsgEnded(reason store.Reason, code int, sig string, timeout time.Duration, ramBytes int64) string {
	switch reason {
	case store.ReasonExited:
		return "exit 0"
	case store.ReasonFailed:
		if sig == "SIGKILL" {
			// Not berth's (its stop is recorded so): the kernel's, for
			// memory (a cgroup's limit, or the machine's), or someone's.
			return "killed by SIGKILL, not by berth (the kernel's out-of-memory killer, or a kill -9: journalctl -k or dmesg says which)"
		}
		if sig != "" {
			return "killed by " + sig
		}
		switch code {
		case 126, 127:
			// A shell's (or env's): it ran nothing (trial AJ:
			// "./prepare.sh" in the job's dir, / by default, was a bare
			// exit 127).
			what := map[int]string{126: "a command it could not execute", 127: "command not found"}[code]
			return fmt.Sprintf("exit %d, %s (berth logs says which; a relative path is from the job's dir, / unless it sets one)", code, what)
		}
		return fmt.Sprintf("exit %d", code)
	case store.ReasonTimedOut:
		return "timed out after " + accounting.FormatDuration(timeout)
	case store.ReasonOOM:
		if ramBytes > 0 {
			return "out of memory: went over its " + accounting.FormatSize(ramBytes)
		}
		return "out of memory"
	}
	return reason.String()
}

func posString(p luaapi.Pos) string {
	if p.Line > 0 {
		return p.File + ":" + strconv.Itoa(p.Line)
	}
	return p.File
}

func posPrefix(p luaapi.Pos) string { return posString(p) + ": " }

// MsgCardsOff says which cards are off for the books, and whose processes
// hold them: "card 1: 21G used by pid 4242 (python3, carol) — not a berth
// job".
func MsgCardsOff(names []string, off map[int]cardState, limit int64) string {
	var parts []string
	for _, i := range slices.Sorted(maps.Keys(off)) {
		for _, f := range off[i].Foreign {
			if f.MemoryBytes <= limit {
				continue
			}
			who := f.Command
			if f.User != "" {
				who += ", " + f.User
			}
			parts = append(parts, fmt.Sprintf("card %s: %s used by pid %d (%s) — not a berth job",
				names[i], accounting.FormatSize(f.MemoryBytes), f.PID, who))
		}
	}
	return strings.Join(parts, "; ")
}

// MsgArrayFull is why an array's next index waits: as many indices as
// max_parallel hold a place (inLine wait behind them).
func MsgArrayFull(maxParallel, inLine int) string {
	return fmt.Sprintf("%s in line for max_parallel = %d (every place taken until an index ends)",
		accounting.Count(inLine, "index"), maxParallel)
}

// msgIndexGated is why an index waits while max_parallel indices of its
// array hold a place.
func msgIndexGated(maxParallel int) string {
	return fmt.Sprintf("waits for a place in its array: max_parallel = %d, and every place is taken until an index ends", maxParallel)
}

// msgIndexBehind is why an index waits while another of its array is the
// array's one in the machine's queue.
func msgIndexBehind(queued string) string {
	return fmt.Sprintf("waits behind %s, its array's index in the machine's queue (an array's indices queue one at a time, lowest first)", queued)
}

// MsgArrayFailed is why an array rests failed.
func MsgArrayFailed(failed, size int, name string) string {
	return fmt.Sprintf("%d of %s failed; berth restart %s --failed runs them again (berth show %s lists them)",
		failed, accounting.Count(size, "index"), name, name)
}
