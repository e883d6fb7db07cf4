package supervisor

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestJournalStreamEnviron: a run whose output is its own journal stream
// is told so in JOURNAL_STREAM (the stream's device:inode, as systemd sets
// it for a service), in place of the daemon's own, unless the job declared
// the variable itself.
func TestJournalStreamEnviron(t *testing.T) {
	t.Parallel()
	socket := filepath.Join(t.TempDir(), "stdout")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var mu sync.Mutex
	streams := map[string][]string{} // by the stream's identifier: its lines after the header
	go func() {
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				b, _ := io.ReadAll(c)
				lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
				if len(lines) < 7 {
					return
				}
				mu.Lock()
				streams[lines[0]] = lines[7:] // the identifier, then six header lines
				mu.Unlock()
			}()
		}
	}()

	const cmd = `cmd = { "sh", "-c", "echo env=$JOURNAL_STREAM; echo fd=$(stat -L -c %d:%i /proc/self/fd/2)" }`
	d, _ := runDaemon(t, `
job "stream" { `+cmd+`, cpus = 0, restart = "no" }
job "declared" { `+cmd+`, cpus = 0, restart = "no", env = { JOURNAL_STREAM = "mine" } }
`, func(cfg *Config) {
		cfg.JournalSocket = socket
		cfg.Environ = append(cfg.Environ, "JOURNAL_STREAM=1:2")
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("errors: %q", d.Status().Errors)
			for _, j := range d.Status().Jobs {
				t.Logf("%s: %s %s", j.Name, j.State, j.Why)
			}
		}
	})
	testkit.WaitFor(t, 20*time.Second, "both jobs' streams to end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(streams) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	field := func(lines []string, key string) string {
		sc := bufio.NewScanner(bytes.NewReader([]byte(strings.Join(lines, "\n"))))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
				return v
			}
		}
		return "(none)"
	}
	got := streams["stream"]
	if env, fd := field(got, "env"), field(got, "fd"); env != fd || env == "1:2" {
		t.Errorf("stream: JOURNAL_STREAM=%s, its stderr %s (the daemon's was 1:2); output %q", env, fd, got)
	}
	if env := field(streams["declared"], "env"); env != "mine" {
		t.Errorf("declared: JOURNAL_STREAM=%s, want what it declared (mine); output %q", env, streams["declared"])
	}
}
