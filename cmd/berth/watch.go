package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor"
)

// This file is `berth status --watch`: the picture kept on the terminal's
// alternate screen and redrawn when the daemon says it changed (GET
// /v1/events), not on a poll. Off a terminal, --watch --json writes one
// status a line at each change, for scripts.

func runStatus(c *cli, argv []string) int {
	fs := c.flags("status")
	f := c.clientFlags(fs, true)
	owners := newOwnerFilter(c, fs)
	watch := fs.Bool("watch", false, "keep the picture on the terminal, redrawn as it changes, until Ctrl-C; with --json, print one status a line at each change")
	rest, code, done := c.parse(fs, argv)
	if done {
		return code
	}
	if len(rest) != 0 {
		fmt.Fprintln(c.stderr, msgUnexpectedArgs("status", rest))
		return exitUsage
	}
	cl := c.client(f)
	if *watch && f.json {
		return c.watchJSON(cl, owners)
	}
	if *watch {
		out, ok := c.stdout.(*os.File)
		if !ok || !isTerminal(out) {
			fmt.Fprintln(c.stderr, msgWatchNotTerminal())
			return exitUsage
		}
		return c.watchStatus(cl, out, owners)
	}
	var s supervisor.Status
	if err := cl.get("/status", nil, &s); err != nil {
		return c.fail(err)
	}
	s = owners.status(cl, s)
	if f.json {
		withAfterWhy(s.Jobs, s.Now)
		return c.writeJSON(s)
	}
	o := c.render(s.Now)
	o.noJobs = owners.none()
	renderStatus(c.stdout, s, o)
	return exitOK
}

// watchSignals are what ends a watch: Ctrl-C, a stop, the terminal gone.
var watchSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Control sequences of the watch. The alternate screen keeps the shell's
// screen as it was, and gives it back whole when the watch ends.
const (
	enterScreen = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J" // alternate screen, cursor hidden, cleared
	leaveScreen = "\x1b[?25h\x1b[?1049l"              // cursor shown, main screen back
	// Each row is cleared whole before it is written: clearing after a
	// line that fills the row would erase its last column, where the
	// cursor waits to wrap.
	clearRow   = "\x1b[2K"
	clearBelow = "\x1b[J" // from the cursor to the screen's end
)

const (
	// retryEvery is how often a watch asks again for a daemon that does
	// not answer.
	retryEvery = time.Second
	// fetchWithin bounds one status request of the watch: a daemon that
	// takes longer is shown as not answering.
	fetchWithin = 10 * time.Second
)

// watchNote is what the follower of /v1/events tells the screen: a
// change, a stream that ended (err nil: the daemon ended it), or an error
// that no retry mends (a daemon older than /v1/events).
type watchNote struct {
	change *supervisor.Change
	lost   bool
	fatal  error
}

// follow reads the daemon's changes into notes, connecting again every
// retryEvery while the daemon is away, until ctx ends.
func follow(ctx context.Context, cl *client, notes chan<- watchNote) {
	send := func(n watchNote) bool {
		select {
		case notes <- n:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		err := cl.changes(ctx, func(ch supervisor.Change) { send(watchNote{change: &ch}) })
		if ctx.Err() != nil {
			return
		}
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotFound {
			send(watchNote{fatal: err})
			return
		}
		if !send(watchNote{lost: true}) {
			return
		}
		t := time.NewTimer(retryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watchView is what the screen shows: the last picture, and what is wrong
// with the daemon when something is.
type watchView struct {
	c      *cli
	cl     *client
	out    *os.File
	owners *ownerFilter
	color  bool
	status supervisor.Status
	// fetched is when status came (with the monotonic clock): ages are
	// status.Now plus the time since, so they stay true between changes
	// without asking the daemon.
	fetched time.Time
	// trouble is the sentence about a daemon stopping or away, "" when it
	// answers; troubleAt is when it began, where the picture's clock stops.
	trouble   string
	troubleAt time.Time
}

// watchStatus is berth status --watch on the terminal out. It ends, with
// the main screen and the cursor given back, on SIGINT, SIGTERM or SIGHUP
// (exit 0), or when the daemon lacks /v1/events (exit 1).
func (c *cli) watchStatus(cl *client, out *os.File, owners *ownerFilter) int {
	// The first picture is asked for before the screen is taken: a daemon
	// that is not there is said as berth status says it, on the shell's
	// screen.
	v := &watchView{c: c, cl: cl, out: out, owners: owners,
		color: c.colorWanted()}
	if err := v.fetch(context.Background()); err != nil {
		return c.fail(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), watchSignals...)
	defer stop()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	// Ctrl-Z: the shell's screen back while stopped, the watch's again
	// after fg.
	suspend := make(chan os.Signal, 1)
	signal.Notify(suspend, syscall.SIGTSTP)
	defer signal.Stop(suspend)

	notes := make(chan watchNote)
	followCtx, stopFollow := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { follow(followCtx, cl, notes) })
	defer wg.Wait()
	defer stopFollow()

	out.WriteString(enterScreen)
	// Whatever ends the watch, a panic included, gives the screen back.
	defer out.WriteString(leaveScreen)
	v.draw()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-suspend:
			out.WriteString(leaveScreen)
			_ = unix.Kill(0, unix.SIGSTOP) // the process group, as the terminal's own SIGTSTP would
			out.WriteString(enterScreen)
		case <-winch:
		case <-tick.C:
			// Ages are redrawn from the last picture; the daemon is not asked.
		case n := <-notes:
			switch {
			case n.fatal != nil:
				out.WriteString(leaveScreen)
				return c.fail(n.fatal) // the main screen is back first, for the sentence
			case n.lost:
				v.fail(msgWatchNoAnswer(cl.socket, v.since()))
			case n.change.Kind == supervisor.ChangeStopping:
				v.fail(msgWatchStopping(v.since()))
			default:
				fctx, cancel := context.WithTimeout(ctx, fetchWithin)
				err := v.fetch(fctx)
				cancel()
				if err != nil && ctx.Err() == nil {
					v.fail(msgWatchNoAnswer(cl.socket, v.since()))
				}
			}
		}
		v.draw()
	}
}

// fetch asks for the picture; the trouble, if any, is over once it comes.
func (v *watchView) fetch(ctx context.Context) error {
	var s supervisor.Status
	if err := v.cl.doContext(ctx, http.MethodGet, "/status", nil, nil, &s); err != nil {
		return err
	}
	v.status, v.fetched = v.owners.status(v.cl, s), time.Now()
	v.trouble, v.troubleAt = "", time.Time{}
	return nil
}

// fail says what is wrong; the picture stays, as it was when it began.
func (v *watchView) fail(sentence string) {
	if v.troubleAt.IsZero() {
		v.troubleAt = time.Now()
	}
	v.trouble = sentence
}

// since is when the trouble began, for its sentence: now for a new one.
func (v *watchView) since() string {
	at := v.troubleAt
	if at.IsZero() {
		at = time.Now()
	}
	return at.In(renderZone).Format("15:04:05")
}

// now is the picture's clock.
func (v *watchView) now() time.Time {
	until := time.Now()
	if !v.troubleAt.IsZero() {
		until = v.troubleAt
	}
	return v.status.Now.Add(until.Sub(v.fetched))
}

// draw writes the whole picture over the screen, fitted to its width and
// height, in one write.
func (v *watchView) draw() {
	width, height := terminalSize(v.out, v.c.env)
	o := renderOptions{width: width, color: v.color, now: v.now(), noJobs: v.owners.none(), viewer: &viewer{uid: v.c.env.uid, name: v.c.env.user}}
	var lines []textLine
	if v.trouble != "" {
		lines = wrapWords(v.trouble, width, "", "  ", sgrRed)
	}
	lines = append(lines, layoutStatus(v.status, o).fit(height-len(lines))...)
	v.out.WriteString(screenText(lines[:min(len(lines), height)], height, o))
}

// screenText is lines written from the top left of a screen of height
// rows, each row cleared before it is written, and the rows below the last
// cleared. No line ends in a newline: the last row must not scroll the
// screen.
func screenText(lines []textLine, height int, o renderOptions) string {
	var b strings.Builder
	b.WriteString("\x1b[H")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(clearRow)
		b.WriteString(o.lineText(l, o.columns()))
	}
	switch {
	case len(lines) == 0:
		b.WriteString(clearBelow)
	case len(lines) < height:
		// To the next row, which exists, and from there down.
		b.WriteString("\r\n" + clearBelow)
	}
	return b.String()
}

// terminalSize is out's columns and rows: as the terminal says, else
// COLUMNS and LINES, else 80 by 24.
func terminalSize(out *os.File, e env) (width, height int) {
	width, height = 80, 24
	if n, err := strconv.Atoi(e.get("COLUMNS")); err == nil && n > 0 {
		width = n
	}
	if n, err := strconv.Atoi(e.get("LINES")); err == nil && n > 0 {
		height = n
	}
	if ws, err := unix.IoctlGetWinsize(int(out.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 && ws.Row > 0 {
		width, height = int(ws.Col), int(ws.Row)
	}
	return width, height
}

// watchJSON is berth status --watch --json: one status a line (compact
// JSON), at once and then at each change, until SIGINT or SIGTERM (exit
// 0) or until the daemon stops (exit 3).
func (c *cli) watchJSON(cl *client, owners *ownerFilter) int {
	sig, stop := signal.NotifyContext(context.Background(), watchSignals...)
	defer stop()
	ctx, cancel := context.WithCancel(sig)
	defer cancel()
	enc := json.NewEncoder(c.stdout)
	var failed error // the status not had, or not written
	gone := false    // the daemon went away as the status was asked for
	err := cl.changes(ctx, func(ch supervisor.Change) {
		if ch.Kind != supervisor.ChangeStatus || failed != nil {
			return
		}
		var s supervisor.Status
		if failed = cl.doContext(ctx, http.MethodGet, "/status", nil, nil, &s); failed != nil {
			gone = wentAway(failed)
		} else {
			s = owners.status(cl, s)
			withAfterWhy(s.Jobs, s.Now)
			failed = enc.Encode(s)
		}
		if failed != nil {
			cancel()
		}
	})
	switch {
	case sig.Err() != nil:
		return exitOK
	case failed != nil && !gone:
		return c.fail(failed)
	case failed == nil && err != nil && !errors.Is(err, errDaemonGone):
		return c.fail(err)
	}
	// It stopped, or went away (killed), perhaps as a status was asked
	// for after its last change: a script sees either as 3.
	fmt.Fprintln(c.stderr, msgWatchEnded(cl.socket))
	return exitNoDaemon
}
