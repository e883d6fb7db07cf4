package units

import (
	"strings"
	"testing"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestMessagesGolden pins every sentence of this package's catalog.
func TestMessagesGolden(t *testing.T) {
	spec := Spec{Job: "train", Run: 7, Argv: []string{"python4", "train.py"}, Dir: "/srv/ml", User: "ml", Group: "video"}
	unit := Name(spec.Job, spec.Run)
	var lines []string
	for _, status := range []int32{200, 203, 216, 217, 226} {
		lines = append(lines, msgStartFailed(unit, spec, "exit-code", status))
	}
	lines = append(lines, msgStartJobEnded(unit, "timeout"))
	// A person's job's unit, whose name the shell would mangle unquoted.
	theirs := Spec{Job: "alice/train", Run: 8, Argv: []string{"ls"}, Dir: "/root", User: "alice"}
	lines = append(lines, msgStartFailed(Name(theirs.Job, theirs.Run), theirs, "exit-code", 200))
	testkit.Golden(t, "testdata/messages.golden", []byte(strings.Join(lines, "\n")+"\n"))
}
