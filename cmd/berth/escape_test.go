package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/runner"
	"github.com/berthd/berth/supervisor/testkit"
)

func TestEscape(t *testing.T) {
	for _, tt := range []struct {
		in, lines, all string
	}{
		{"plain text, ünïcode …\n", "plain text, ünïcode …\n", `plain text, ünïcode …\n`},
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`, `\x1b[2J\x1b[H`},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`, `\x1b]0;title\x07`},
		{"col1\tcol2\r\n", "col1\tcol2\r\n", `col1\tcol2\r\n`},
		{"50%\r100%\n", `50%\r100%` + "\n", `50%\r100%\n`},
		{"del\x7f nul\x00", `del\x7f nul\x00`, `del\x7f nul\x00`},
		{"c1 \u009b31m", `c1 \u009b31m`, `c1 \u009b31m`},
		{"bidi \u202eevil\u202c \u2066x\u2069", `bidi \u202eevil\u202c \u2066x\u2069`, `bidi \u202eevil\u202c \u2066x\u2069`},
		{"not utf-8 \xff\xc3(", `not utf-8 \xff\xc3(`, `not utf-8 \xff\xc3(`},
		{`already \x1b escaped`, `already \x1b escaped`, `already \x1b escaped`},
		{"ends in \r", `ends in \r`, `ends in \r`},
		{"ends in half \xe2\x80", `ends in half \xe2\x80`, `ends in half \xe2\x80`},
	} {
		if got := escapeText(tt.in); got != tt.all {
			t.Errorf("escapeText(%q) = %q, want %q", tt.in, got, tt.all)
		}
		var b bytes.Buffer
		w := &escapeWriter{w: &b}
		w.Write([]byte(tt.in))
		w.Close()
		if got := b.String(); got != tt.lines {
			t.Errorf("escapeWriter(%q) = %q, want %q", tt.in, got, tt.lines)
		}
	}
}

// FuzzEscape: a job's output is anything. Escaped, it holds no character a
// terminal acts on, it is valid UTF-8, and it does not depend on how the
// output was cut into reads.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"hello\n", "\x1b[31mred\x1b[0m\r\n", "a\rb", "\xe2\x80\xae", "\xc2\x9b", "\xff\xfe", "x\r"} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		var whole, pieces bytes.Buffer
		w := &escapeWriter{w: &whole}
		w.Write(in)
		w.Close()
		at := int(cut) % (len(in) + 1)
		w = &escapeWriter{w: &pieces}
		w.Write(in[:at])
		w.Write(in[at:])
		w.Close()
		if whole.String() != pieces.String() {
			t.Fatalf("%q: in one write %q, cut at %d %q", in, whole.String(), at, pieces.String())
		}
		check := func(how, out string, keep string) {
			if !utf8.ValidString(out) {
				t.Errorf("%s(%q) = %q: not UTF-8", how, in, out)
			}
			for i, r := range out {
				if (r < 0x20 || r == 0x7f || hiddenRune(r)) && !strings.ContainsRune(keep, r) {
					t.Errorf("%s(%q) = %q: %U at %d", how, in, out, r, i)
				}
				if r == '\r' && !strings.HasPrefix(out[i:], "\r\n") {
					t.Errorf("%s(%q) = %q: a \\r that does not end a line", how, in, out)
				}
			}
		}
		check("escapeWriter", whole.String(), "\n\t\r")
		all := escapeText(string(in))
		check("escapeText", all, "")
		if escapeText(all) != all {
			t.Errorf("escapeText(%q) = %q is escaped again", in, all)
		}
	})
}

// pty is a pseudo-terminal: what is written to tty reads back from the
// other end, unchanged (no \n → \r\n), as a terminal would receive it.
type pty struct {
	tty  *os.File
	mu   sync.Mutex // guards got
	got  bytes.Buffer
	done chan struct{}
}

func openPTY(t *testing.T) *pty {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	p := &pty{tty: tty, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.got.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return // EIO once the terminal's side is closed
			}
		}
	}()
	t.Cleanup(func() { tty.Close(); <-p.done; master.Close() })
	return p
}

// read closes the terminal's side and returns all that was written to it.
func (p *pty) read() string {
	p.tty.Close()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got.String()
}

// withoutHeader is a run's output less the header line the log file gives
// it (runner.RunHeader), which must be there.
func withoutHeader(t *testing.T, out string) string {
	t.Helper()
	header, rest, _ := strings.Cut(out, "\n")
	if _, _, ok := runner.ParseRunHeader([]byte(header)); !ok {
		t.Fatalf("the output does not start with its run's header: %q", out)
	}
	return rest
}

// TestLogsEscapedOnATerminal: berth logs on a terminal shows what the job
// wrote to drive it (clear the screen, retitle the window, overwrite a
// line) escaped; --raw, or output that is not a terminal, gets the bytes.
func TestLogsEscapedOnATerminal(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"noisy.lua": `job "noisy" { cmd = { "printf", "%s", "\27[2Jcleared\27]0;pwned\7 50%\r100%\r\nnext\n" } }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("noisy", "done")
	const raw = "\x1b[2Jcleared\x1b]0;pwned\x07 50%\r100%\r\nnext\n"
	const escaped = `\x1b[2Jcleared\x1b]0;pwned\x07 50%\r100%` + "\r\nnext\n"

	onTerminal := func(args ...string) string {
		t.Helper()
		p := openPTY(t)
		var errOut bytes.Buffer
		c := &cli{stdout: p.tty, stderr: &errOut, env: env{lookup: func(k string) (string, bool) {
			if k == "BERTH_SOCKET" {
				return d.socket, true
			}
			return "", false
		}}}
		if code := c.main(args); code != exitOK {
			t.Fatalf("berth %v: exit %d, %s", args, code, errOut.String())
		}
		return withoutHeader(t, p.read())
	}
	if got := onTerminal("logs", "noisy"); got != escaped {
		t.Errorf("berth logs on a terminal wrote %q, want %q", got, escaped)
	}
	if got := onTerminal("logs", "noisy", "--raw"); got != raw {
		t.Errorf("berth logs --raw on a terminal wrote %q, want %q", got, raw)
	}
	if got, _, _ := d.cli("logs", "noisy"); withoutHeader(t, got) != raw {
		t.Errorf("berth logs into a pipe wrote %q, want %q", got, raw)
	}
	d.stop()
}

// sgrCode is a colour code berth writes itself.
var sgrCode = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// TestRenderEscapesWhatJobsControl: what jobs and job files put into the
// status and the show — a why quoting a dir, a file's error, a command, an
// env value, a description — reaches the terminal escaped, even with
// colour on; only berth's own colour codes are control sequences.
func TestRenderEscapesWhatJobsControl(t *testing.T) {
	pinRenderZone(t)
	s := quietBox()
	s.Jobs[0].State, s.Jobs[0].Why = "failed", "cannot start: dir /srv/\x1b[2J\x1b[H does not exist (berth show index-photos shows its command, directory and user)"
	s.Jobs[1].Why = "exit 3\r\x1b[32mall good\u009b"
	s.Problems = []supervisor.Problem{{Code: "file_refused", Text: "/etc/berth/jobs.d/\x1b]0;pwned\x07.lua is writable by others\u202e"},
		{Code: "file_error", Text: "/etc/berth/jobs.d/two\nlines.lua:1: job \"b\" asks for 9 cores"}}
	s.Errors = []string{s.Problems[0].Text, s.Problems[1].Text}
	d := supervisor.JobDetail{
		Status: s.Jobs[0],
		Definition: supervisor.JobDefinition{
			Name: "index-photos", File: "jobs.d/photos.lua", Line: 1,
			Cmd: []string{"sh", "-c", "echo \x1b[5mblink"}, Dir: "/srv/\x1b[2J\x1b[H",
			Resources: supervisor.Size{CPUs: 2}, Env: map[string]string{"PS1": "\x1b]0;title\x07$ "},
			Restart: "no", StopSignal: "SIGTERM", StopTimeout: "10s", OnChange: "restart", Enabled: true,
			Description: "photos\ttabbed\nsecond line",
		},
		NextEnv: []string{"PS1=\x1b]0;title\x07$ ", "BERTH_JOB=index-photos"},
		Runs:    []supervisor.RunView{},
		Logs:    "/var/lib/berth/logs/index-photos.log",
	}
	var plain strings.Builder
	for _, color := range []bool{false, true} {
		var b bytes.Buffer
		o := renderOptions{width: 100, now: renderNow, color: color}
		renderStatus(&b, s, o)
		b.WriteString("---\n")
		renderShow(&b, d, o)
		out := b.String()
		for i, r := range sgrCode.ReplaceAllString(out, "") {
			if (r < 0x20 && r != '\n') || r == 0x7f || hiddenRune(r) {
				t.Errorf("colour %v: %U at %d reaches the terminal:\n%s", color, r, i, out)
				break
			}
		}
		if !color {
			plain.WriteString(out)
		}
	}
	// A line break in a file's name is shown as one, not as a space.
	if !strings.Contains(plain.String(), `jobs.d/two\nlines.lua:1:`) {
		t.Errorf("the name with a line break is not shown escaped:\n%s", plain.String())
	}
	testkit.Golden(t, "testdata/render/escaped.golden", []byte(plain.String()))
}
