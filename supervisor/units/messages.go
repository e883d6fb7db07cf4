package units

import (
	"fmt"
	"strconv"
)

// The sentences of this package that a person reads (as the reason a job
// could not start); messages_test.go pins them.

// msgStartFailed says why a run's unit failed to start, from systemd's
// EXIT_* code for the step that failed (ExecMainStatus).
func msgStartFailed(unit string, spec Spec, result string, status int32) string {
	var why string
	switch status {
	case 200:
		why = "cannot change into its directory " + spec.Dir
	case 203:
		why = "cannot execute " + spec.Argv[0]
	case 216:
		why = "the group " + strconv.Quote(spec.Group) + " does not exist"
	case 217:
		why = "the user " + strconv.Quote(spec.User) + " does not exist"
	default:
		return fmt.Sprintf("its unit %s failed to start: %s, status %d (journalctl -u %s says why)", unit, result, status, unit)
	}
	return fmt.Sprintf("%s (journalctl -u %s says more)", why, unit)
}

// msgStartJobEnded says that a unit's start job ended other than done,
// where the unit says nothing more.
func msgStartJobEnded(unit, result string) string {
	return fmt.Sprintf("its unit %s failed to start: the start job ended %q (journalctl -u %s says why)", unit, result, unit)
}
