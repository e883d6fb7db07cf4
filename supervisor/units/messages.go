package units

import (
	"fmt"
	"strconv"
	"strings"
)

// The sentences of this package that a person reads (as the reason a job
// could not start); messages_test.go pins them.

// msgStartFailed says why a run's unit failed to start, from systemd's
// EXIT_* code for the step that failed (ExecMainStatus). What systemd
// logged of it is in the system journal, which the job's owner may not
// read (trial AW: a person was sent there, to a name the shell mangled).
func msgStartFailed(unit string, spec Spec, result string, status int32) string {
	var why string
	switch status {
	case 200:
		// The daemon saw it there before the start: the job's user may
		// not enter it, as a rule.
		why = fmt.Sprintf("cannot change into its directory %s: %s may not enter it, or it went away", spec.Dir, userOf(spec))
	case 203:
		why = "cannot execute " + spec.Argv[0]
	case 216:
		why = "the group " + strconv.Quote(spec.Group) + " does not exist"
	case 217:
		why = "the user " + strconv.Quote(spec.User) + " does not exist"
	default:
		return fmt.Sprintf("its unit %s failed to start: %s, status %d (journalctl -u %s says why, to root and the journal's readers)", unit, result, status, shellQuoted(unit))
	}
	return fmt.Sprintf("%s (journalctl -u %s says more, to root and the journal's readers)", why, shellQuoted(unit))
}

// userOf is who a run runs as, for a sentence.
func userOf(spec Spec) string {
	if spec.User == "" {
		return "root"
	}
	return spec.User
}

// shellQuoted is s as one word a shell reads back as s: a person's unit's
// name has a backslash (berth-alice\x2ftrain-7.service).
func shellQuoted(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// msgStartJobEnded says that a unit's start job ended other than done,
// where the unit says nothing more.
func msgStartJobEnded(unit, result string) string {
	return fmt.Sprintf("its unit %s failed to start: the start job ended %q (journalctl -u %s says why, to root and the journal's readers)", unit, result, shellQuoted(unit))
}
