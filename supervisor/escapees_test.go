package supervisor

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestEscapeesStoppedAsTheRun: a run's process that left its process
// group (setsid) is sent the stop's signal as the group is, and SIGKILLed
// only once the stop_timeout is over, as the group would have been (trial
// AP: SIGKILLed at once, with no signal first).
func TestEscapeesStoppedAsTheRun(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	// One escapee ends when told; the other is deaf, and says it heard.
	escapee := func(name, onTerm string) string {
		return `setsid sh -c 'trap "` + onTerm + `" TERM; echo $$ > ` + out + `/` + name + `.pid; while :; do sleep 0.05; done' &`
	}
	d, _ := runDaemon(t, `job "polite" { cmd = { "sh", "-c", "`+strings.ReplaceAll(escapee("polite", "echo termed > "+out+"/polite.termed; exit 0"), `"`, `\"`)+` wait" }, cpus = 0, stop_timeout = "1h" }
job "deaf" { cmd = { "sh", "-c", "`+strings.ReplaceAll(escapee("deaf", "echo heard >> "+out+"/deaf.heard"), `"`, `\"`)+` wait" }, cpus = 0, stop_timeout = "1s" }`, nil)
	pidOf := func(name string) int {
		var pid int
		testkit.WaitFor(t, 20*time.Second, name+"'s escapee to start", func() bool {
			b, err := os.ReadFile(filepath.Join(out, name+".pid"))
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return err == nil && pid > 0
		})
		return pid
	}
	polite, deaf := pidOf("polite"), pidOf("deaf")
	for _, job := range []string{"polite", "deaf"} {
		if code, body := as(t, d, "root", "POST", jobPath(job)+"/stop"); code != http.StatusOK {
			t.Fatalf("stop %s: %d %s", job, code, body)
		}
	}
	gone := func(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
	// Told, the polite one ends by itself, long before its stop_timeout.
	testkit.WaitFor(t, 20*time.Second, "the polite escapee to hear the stop and end", func() bool {
		_, err := os.Stat(filepath.Join(out, "polite.termed"))
		return err == nil && gone(polite)
	})
	// The deaf one heard it too, and is killed after its stop_timeout.
	testkit.WaitFor(t, 20*time.Second, "the deaf escapee to be killed", func() bool { return gone(deaf) })
	if b, err := os.ReadFile(filepath.Join(out, "deaf.heard")); err != nil || !strings.Contains(string(b), "heard") {
		t.Errorf("the deaf escapee was not sent the stop's signal: %q %v", b, err)
	}
}
