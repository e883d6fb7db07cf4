package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/store"
)

// This file is the catalog of what the berth command says to a person that
// is not already said by the error values of the packages below it (each of
// those keeps its sentences in its own errors.go). Every sentence says what
// is wrong and what to do next, naming the command that helps. The golden
// test in messages_test.go pins them all.

// flagError is a flag whose value was read but not accepted.
type flagError struct {
	flag string
	err  error
}

func (e flagError) Error() string { return e.flag + ": " + e.err.Error() }
func (e flagError) Unwrap() error { return e.err }

// msgNoCommand: berth was given flags and no command to give them to.
func msgNoCommand(args []string) string {
	return fmt.Sprintf("berth: %s, but no command: the command comes before or after its flags (berth --socket PATH status, say; berth help lists the commands)", strings.Join(args, " "))
}

func msgUnknownCommand(name string, known []string) string {
	// A command it begins ("stat" of status) before the nearest by
	// spelling (start, which changes things).
	for _, k := range known {
		if len(name) >= 3 && strings.HasPrefix(k, name) {
			return fmt.Sprintf("berth: unknown command %q (did you mean %q?); berth help lists the commands", name, k)
		}
	}
	if s := luaapi.Suggest(name, known); s != "" {
		return fmt.Sprintf("berth: unknown command %q (did you mean %q?); berth help lists the commands", name, s)
	}
	return fmt.Sprintf("berth: unknown command %q; berth help lists the commands", name)
}

// msgRunOutdated is said in berth show of a run started from an earlier
// definition than the one shown (on_change = "finish").
func msgRunOutdated() string {
	return "this run started from an earlier definition; the one shown applies from the next run"
}

// msgNoneKept is berth status --mine (whose is "yours") or --owner NAME
// ("NAME's") where none of the daemon's total jobs is that person's.
func msgNoneKept(total int, whose string) string {
	if total == 1 {
		return "the daemon's one job is not " + whose + " (berth status without --mine or --owner shows it)"
	}
	return fmt.Sprintf("none of the daemon's %d jobs is %s (berth status without --mine or --owner shows them)", total, whose)
}

func msgUsage(command string, err error) string {
	return fmt.Sprintf("%s: %v (%s --help shows the usage)", command, err, command)
}

func msgUnexpectedArgs(command string, args []string) string {
	if command == "status" || command == "jobs" {
		// systemctl status UNIT, supervisorctl status NAME: one job's
		// is berth show's.
		return fmt.Sprintf("berth %s: unexpected argument %q; it takes none but flags (berth show %s shows one job; berth %s --help shows the usage)", command, args[0], args[0], command)
	}
	return fmt.Sprintf("berth %s: unexpected argument %q; it takes none but flags (berth %s --help shows the usage)", command, args[0], command)
}

func msgWarning(s string) string { return "berth: warning: " + s }

// inventoryExit is the exit code for an inventory that err refused: a
// flag's value is a usage error.
func inventoryExit(err error) int {
	var fe flagError
	var oe *probes.OverrideError
	var ge *probes.GPUListError
	if errors.As(err, &fe) || errors.As(err, &oe) || errors.As(err, &ge) {
		return exitUsage
	}
	return exitFailed
}

func msgInventory(err error) string {
	var fe flagError
	if errors.As(err, &fe) {
		return "berth: " + fe.Error()
	}
	if errors.Is(err, probes.ErrCoresUnknown) {
		return "berth: cannot tell what this machine has: " + err.Error() + " (give --cpus N to say it)"
	}
	// An override out of range says itself what is accepted.
	return "berth: " + err.Error()
}

func msgCheckTarget(target string, err error) string {
	if os.IsNotExist(err) {
		return fmt.Sprintf("%s: no such file or directory; name a job file or a directory of them (berth check FILE|DIR...)", target)
	}
	if os.IsPermission(err) {
		// Not sudo: a person is seldom one who may, and root's check
		// holds the file to the administrators' rules (trial AS).
		return fmt.Sprintf("%s: permission denied; berth check reads files as you (ls -l %s says whose it is: its owner may let you read it, or check it themselves)", target, supervisor.QuoteArg(target))
	}
	return fmt.Sprintf("%s: %v", target, err)
}

func msgCheckSummary(files, jobs, flavors, errs int) string {
	return fmt.Sprintf("%s, %s, %s, %s", count(files, "file"), count(jobs, "job"), count(flavors, "flavor"), count(errs, "error"))
}

func msgSocket(path string, err error) string {
	if errors.Is(err, errNotSocket) {
		return fmt.Sprintf("berth: control socket %s: a file that is not a socket is in the way; berth does not remove it (move it, or give --socket PATH)", path)
	}
	if errors.Is(err, errSocketLive) {
		return fmt.Sprintf("berth: control socket %s: another berth daemon is listening on it (berth --socket %s status shows it; systemctl status berth, if it is the system's)", path, supervisor.QuoteArg(path))
	}
	var de *socketDirError
	if errors.As(err, &de) {
		return fmt.Sprintf("berth: control socket %s: its directory %s is not the daemon's alone (%s): another account could put its own socket there and be asked what the daemon is (ls -ld %s; %s and start again, or give --socket PATH)",
			path, de.dir, de.why, de.dir, de.fix)
	}
	return fmt.Sprintf("berth: cannot listen on control socket %s: %v (give --socket PATH, or set BERTH_SOCKET)", path, err)
}

// msgMetricsListen says why --metrics ADDR cannot be served, and what to do.
func msgMetricsListen(addr string, err error) string {
	example := "127.0.0.1:9465"
	host, port, splitErr := net.SplitHostPort(addr)
	if n, convErr := strconv.Atoi(port); splitErr == nil && convErr == nil && n > 0 && n < 65535 && errors.Is(err, syscall.EADDRINUSE) {
		example = net.JoinHostPort(host, strconv.Itoa(n+1)) // not the one in use (trial AJ)
	}
	fix := "give --metrics HOST:PORT, e.g. " + example + ", or --metrics \"\" for none; BERTH_METRICS sets it too"
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		if splitErr != nil {
			port = addr
		}
		return fmt.Sprintf("berth: cannot serve metrics on %s: the address is in use, by another program or another berth daemon (ss -ltnp 'sport = :%s' shows which; %s)", addr, port, fix)
	case errors.Is(err, syscall.EACCES):
		return fmt.Sprintf("berth: cannot serve metrics on %s: permission denied; ports below 1024 need root or CAP_NET_BIND_SERVICE (%s)", addr, fix)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Sprintf("berth: cannot serve metrics on %s: no interface of this machine has that address (ip -brief address lists them; %s)", addr, fix)
	}
	return fmt.Sprintf("berth: cannot serve metrics on %s: %v (%s)", addr, err, fix)
}

func msgNoSystemd(err error) string {
	return fmt.Sprintf("berth: --runner units: %v (is this daemon started by systemd? --runner direct runs jobs as the daemon's own children)", err)
}

// msgRunner says how runs are started, and what that does not guarantee:
// with coresByAffinity, that a run's cores are an affinity it may widen.
func msgRunner(runner string, coresByAffinity bool) string {
	switch {
	case runner == "units" && coresByAffinity:
		return "runs as systemd units: grants enforced but for cores, an affinity a job may widen (cgroup v1: no cpuset), jobs outlive the daemon"
	case runner == "units":
		return "runs as systemd units: grants enforced, jobs outlive the daemon"
	}
	return "runs as its own children: grants are not enforced and jobs stop with the daemon"
}

// msgBinaryReplaced says that the daemon runs a binary that has since been
// replaced (an upgrade), and what a restart does to the jobs.
func msgBinaryReplaced(d supervisor.DaemonStatus, runner, client string) string {
	versions := ""
	if d.Version != client {
		versions = fmt.Sprintf(" (it runs %s; this berth is %s)", d.Version, client)
	}
	restart := "sudo systemctl restart berth; the jobs go on, as units"
	if runner != "units" {
		restart = "restarting it stops the jobs it runs: restart it (sudo systemctl restart berth, or as it was started) when they may stop"
	}
	return fmt.Sprintf("the daemon's binary %s was replaced since it started%s: the upgrade is in force once the daemon restarts (%s)",
		d.Binary, versions, restart)
}

func msgOpenState(stateDir string, err error) string {
	var locked *store.LockedError
	if errors.As(err, &locked) {
		return "berth: " + locked.Error()
	}
	var notState *store.NotStateError
	if errors.As(err, &notState) {
		return msgNotState(notState)
	}
	switch path := filepath.Join(stateDir, "state.db"); {
	case errors.Is(err, store.ErrCorrupt):
		return fmt.Sprintf("berth: state %s is damaged, and berth cannot read it (%v): put back a copy if you have one; to start afresh, move it aside (batch jobs done before then run again): mv %s %s.bad",
			path, err, path, path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("berth: cannot open the state: %v: the state directory must be the daemon's to write (ls -ld %s shows whose it is; sudo chown -R $(id -un) %s makes it yours), or give --state DIR, or set BERTH_STATE",
			err, stateDir, stateDir)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Sprintf("berth: cannot open the state: %v: its file system is full; free space under %s (df -h %s), then start berth again", err, stateDir, stateDir)
	case errors.Is(err, syscall.EROFS):
		return fmt.Sprintf("berth: cannot open the state: %v: its file system is mounted read-only (findmnt -T %s); mount it writable, or give --state DIR", err, stateDir)
	case errors.Is(err, syscall.ENOTDIR):
		// Said as the jobs directory's is (trial AQ).
		return fmt.Sprintf("berth: cannot open the state: %v: the state directory %s, or one above it, is a file, not a directory (ls -ld %s; move it away, or give --state DIR)", err, stateDir, stateDir)
	}
	return fmt.Sprintf("berth: cannot open the state: %v (give --state DIR, or set BERTH_STATE)", err)
}

// msgNotState refuses a file at the state's path that holds no state berth
// wrote. berth starts afresh only where there is no file; moving the file
// aside is the person's decision, since a new state runs again every
// batch job the old one had recorded done.
func msgNotState(e *store.NotStateError) string {
	aside := fmt.Sprintf("mv %s %s.bad", e.Path, e.Path)
	switch e.Problem {
	case store.NotStateEmpty:
		return fmt.Sprintf("berth: state %s is empty (0 bytes): the history it held is gone (put back a copy if you have one), and berth starts a new state only where there is no file; to start afresh, move it aside (batch jobs done before then run again): %s",
			e.Path, aside)
	case store.NotStateNotBolt:
		return fmt.Sprintf("berth: state %s is not a berth state file (%d bytes, not a bbolt database): if --state names the wrong directory, give the right one (or set BERTH_STATE); to start afresh there, move it aside: %s",
			e.Path, e.Size, aside)
	}
	return fmt.Sprintf("berth: state %s is a bbolt database that berth did not write (it has no berth metadata): if --state names the wrong directory, give the right one (or set BERTH_STATE); to start afresh there, move it aside: %s",
		e.Path, aside)
}

func msgNoDaemon(sockets ...string) string {
	where := sockets[len(sockets)-1]
	if len(sockets) > 1 {
		where = strings.Join(sockets[:len(sockets)-1], ", ") + " or " + where
	}
	return fmt.Sprintf("berth: no daemon answers on %s; start one with systemctl start berth, or berth daemon (give --socket PATH or set BERTH_SOCKET if it listens elsewhere)", where)
}

// msgNothingListens: the socket is there, and nothing listens on it: the
// daemon went away without removing it (killed), and systemd may be
// starting it again (trial AK: "start one with systemctl start berth"
// while systemd was).
func msgNothingListens(socket string) string {
	return fmt.Sprintf("berth: no daemon answers on %s, though its socket is there: the daemon went away (systemctl status berth says whether systemd is starting it again, journalctl -u berth why it ended; berth daemon, or systemctl start berth, starts one)", socket)
}

// msgNotASocket: the path the client was given is there, but is no
// socket: a wrong --socket or BERTH_SOCKET, not a daemon gone (trial AQ).
func msgNotASocket(path, kind string) string {
	return fmt.Sprintf("berth: %s is a %s, not a socket: no daemon listens there (give the daemon's socket, the path its --socket names, with --socket PATH or BERTH_SOCKET; the system daemon's is %s)", path, kind, systemSocket)
}

// msgVersionNoDaemon is berth version's line for the daemon where none
// answers.
func msgVersionNoDaemon(sockets ...string) string {
	return "daemon: none answers on " + strings.Join(sockets, " or ")
}

// msgSocketDenied: group is the socket's, the one the daemon answers, or
// "" where it cannot be told (berth, the package's).
func msgSocketDenied(socket, group string) string {
	if group == "" {
		// The socket is root's group: the daemon's --group did not exist
		// when it last looked.
		return fmt.Sprintf("berth: permission denied on %s: the daemon answers only root and its own user, as its socket has no group "+
			"(the group the daemon names with --group, berth by default, does not exist: an administrator makes it, sudo groupadd berth, "+
			"which the daemon takes at its next berth reload; then sudo usermod -aG berth $USER, and log in again)", socket)
	}
	return fmt.Sprintf("berth: permission denied on %s: the daemon answers root, its own user and the group %s (sudo usermod -aG %s $USER, then log in again)", socket, group, group)
}

// msgAddedDone: a job added by a file written is done already, by an
// earlier run of the same definition.
func msgAddedDone(job string) string {
	return fmt.Sprintf("%s: done already, by an earlier run of this same definition, and it stays done (berth restart %s runs it again)", job, quoteArg(job))
}

// msgSubmitSameName refuses two files given to berth submit that would
// have one name in the job directory.
func msgSubmitSameName(first, second, name string) string {
	return fmt.Sprintf("berth submit: %s and %s would both be %s in your job directory, the second in place of the first; give them different names", first, second, name)
}

// msgSubmitWouldReplace refuses a berth submit that would replace a file
// of the job directory with another.
func msgSubmitWouldReplace(path, target string) string {
	name := filepath.Base(target)
	return fmt.Sprintf("berth submit: %s is in your job directory already, and %s is not the same: submitting it would replace it, stopping the jobs of the one there that it does not declare "+
		"(berth submit --replace %s replaces it; berth edit %s edits the one there; or give the file another name)", target, path, quoteArg(path), quoteArg(name))
}

// msgSocketDirNotYours: the directory of the person's own daemon's socket,
// in /tmp, is not theirs alone; its socket is not tried.
func msgSocketDirNotYours(dir, why, fix string) string {
	return fmt.Sprintf("%s, where your own daemon's socket would be, is not yours alone (%s): another account could answer there as your daemon, and its socket is not tried (ls -ld %s; %s, or set XDG_RUNTIME_DIR or BERTH_SOCKET)", dir, why, dir, fix)
}

// msgSocketBlocked: the caller may not enter dir, on the way to the
// socket; its group is no matter then.
func msgSocketBlocked(socket, dir string) string {
	return fmt.Sprintf("berth: cannot reach %s: you may not enter %s, on the way to it (ls -ld %s shows whose it is; the socket must be where the daemon's people can reach it, as /run/berth is: give --socket PATH or set BERTH_SOCKET)",
		socket, dir, dir)
}

// msgOthersLeft: berth stop --all left others' jobs running; refusal is
// what the daemon said of the first.
func msgOthersLeft(verb string, n int, refusal string) string {
	if n == 1 {
		return fmt.Sprintf("1 job left as it is, not yours to %s: %s", verb, refusal)
	}
	return fmt.Sprintf("%s left as they are, not yours to %s; the first: %s", count(n, "job"), verb, refusal)
}

// msgBooksDiffer: the daemon's books are not what berth machine probed.
func msgBooksDiffer(m supervisor.MachineStatus) string {
	ram := "memory unknown"
	if m.RAMBytes != nil {
		ram = accounting.FormatSize(*m.RAMBytes) + " of memory"
	}
	return fmt.Sprintf("the daemon's books differ from what is found above: %s, %s and %s (its --cpus, --gpus, --ram or --gpu-mem, or its own CUDA_VISIBLE_DEVICES, CPU set or memory limit); jobs are placed against its books",
		count(m.CPUs, "core"), count(len(m.Cards), "card")+cardsMemory(m.Cards), ram)
}

// cardsMemory is what the books give cards for shares, as msgBooksDiffer
// says it after their count: " of 16G", " of 16G, 24G"; "" where it is
// unknown.
func cardsMemory(cards []supervisor.CardStatus) string {
	var sizes []string
	for _, c := range cards {
		if c.ShareOfBytes == nil {
			return ""
		}
		sizes = append(sizes, accounting.FormatSize(*c.ShareOfBytes))
	}
	if len(sizes) == 0 {
		return ""
	}
	if len(slices.Compact(slices.Clone(sizes))) == 1 {
		return " of " + sizes[0]
	}
	return " (" + strings.Join(sizes, ", ") + ")"
}

// msgCardBooks is what the books give card c for shares by memory, as
// berth machine's line of it says: "16G for shares", "5G of 16G booked by
// shares; 11G left for another", "16G, held whole"; ""
// where its memory is unknown.
func msgCardBooks(c supervisor.CardStatus) string {
	if c.ShareOfBytes == nil {
		return ""
	}
	total := accounting.FormatSize(*c.ShareOfBytes)
	switch {
	case c.Holder != "":
		return total + ", held whole"
	case len(c.Shares) == 0 && c.KeptFor != "" && c.RoomBytes != nil && *c.RoomBytes > 0:
		// As berth status says it (trial BC: "16G for shares" of a card
		// the head kept 12G of).
		return msgPartKept(c)
	case len(c.Shares) == 0:
		return total + " for shares"
	}
	var booked int64
	for _, sh := range c.Shares {
		booked += sh.Bytes
	}
	return accounting.FormatSize(booked) + " of " + total + " booked by shares" + roomLeft(c)
}

// msgPartKept says what the head of the queue keeps for its share of a
// card no one shares, and what is left: "12G kept for head, first in
// line; 4G left for another".
func msgPartKept(c supervisor.CardStatus) string {
	return fmt.Sprintf("%s kept for %s, first in line; %s left for another",
		accounting.FormatSize(*c.ShareOfBytes-*c.RoomBytes), c.KeptFor, accounting.FormatSize(*c.RoomBytes))
}

// msgYourQuota is a person's quota and what their jobs hold of it, for
// berth machine.
func msgYourQuota(owner string, q supervisor.QuotaView) string {
	var parts []string
	if l := q.Quota.CPUs; l >= 0 {
		parts = append(parts, fmt.Sprintf("%d of %s", q.Held.CPUs, count(l, "core")))
	}
	if l := q.Quota.GPUs; l >= 0 {
		cards := fmt.Sprintf("%d of %s", q.Held.GPUs, count(l, "card"))
		switch {
		case q.Quota.GPUMemBytes < 0 && q.CardBytes > 0:
			// Shares count as cards, a card's memory as one: what they
			// come to, or "0 of 1" reads as room (trial AS).
			cards = fmt.Sprintf("%s of %s in all (%d whole, and %s of gpu memory in shares, every %s counting as a card)", supervisor.CardsWorth(q),
				count(l, "card"), q.Held.GPUs, accounting.FormatSize(q.Held.GPUMemBytes), accounting.FormatSize(q.CardBytes))
		case q.Quota.GPUMemBytes < 0:
			cards += fmt.Sprintf(" (shares of cards count: %s of gpu memory held in shares)", accounting.FormatSize(q.Held.GPUMemBytes))
		}
		parts = append(parts, cards)
	}
	if l := q.Quota.GPUMemBytes; l >= 0 {
		part := fmt.Sprintf("%s of %s of gpu memory in shares", accounting.FormatSize(q.Held.GPUMemBytes), accounting.FormatSize(l))
		if q.Quota.GPUs < 0 {
			// gpu_mem bounds shares alone (trial AR: three cards held
			// whole read as "0B of 20G").
			part += fmt.Sprintf(" (and %s whole, which a quota of gpu_mem does not bound: its gpus would)", count(q.Held.GPUs, "card"))
		}
		parts = append(parts, part)
	}
	if l := q.Quota.RAMBytes; l >= 0 {
		parts = append(parts, fmt.Sprintf("%s of %s memory", accounting.FormatSize(q.Held.RAMBytes), accounting.FormatSize(l)))
	}
	return fmt.Sprintf("your quota (%s): your jobs hold %s; a job that would take you past it waits (berth status --mine shows your jobs)", owner, strings.Join(parts, ", "))
}

// msgPersonDirElsewhere: a person's job directory checked where the
// people's directories are not looked for.
func msgPersonDirElsewhere(dir, person string) string {
	return fmt.Sprintf("%s is %s's, and named for them: if it is their job directory, check it as theirs with the daemon that reads it (berth check --socket PATH), or say where the people's directories are (BERTH_USER_JOBS=%s berth check …); as an administrators' directory it would be refused (it is not root's)",
		dir, person, filepath.Dir(filepath.Clean(dir)))
}

// msgMachineNoDaemon: berth machine was pointed at a daemon that did not
// answer.
func msgMachineNoDaemon(err error) string {
	var why string
	if nd := (*noDaemonError)(nil); errors.As(err, &nd) {
		why = "no daemon answers on " + strings.Join(nd.sockets, " or ")
	} else {
		why = err.Error()
	}
	return why + "; what follows is this machine as found here, without a daemon's books or who holds what"
}

// msgDaemonLoading: the daemon has not read its job files yet (it has
// just started): the jobs it lists are not all there are.
func msgDaemonLoading() string {
	return "the daemon is reading its job files, as it does at start: the jobs are listed once it has (berth status --watch shows when)"
}

// msgListLoading says, after a list (berth jobs, berth flavors), that
// the daemon has not read its job files yet: the list is not complete.
func msgListLoading(list string) string {
	return fmt.Sprintf("berth: the daemon is still reading its job files, as it does at start: this list of %s is not complete yet (berth status --watch shows when it is)", list)
}

// msgDaemonStopping heads berth status while the daemon shuts down.
func msgDaemonStopping(units bool) string {
	if units {
		// Runs as units outlive it: only the stops under way are seen
		// through (trial AG: "every job is being stopped" was false).
		return "the daemon is stopping: the runs, systemd units, go on, and the next daemon takes them back; the stops under way are seen through first, each within its stop_timeout, and no start, stop, restart or reload is taken meanwhile (systemctl status berth says why)"
	}
	return "the daemon is stopping: every job is being stopped, each with its stop_signal and stop_timeout, and no start, stop, restart or reload is taken (systemctl status berth says why; the next daemon takes up from here)"
}

func msgDaemonGone() string {
	return "berth: the daemon stopped while its answer came (berth status says whether it is back; systemctl status berth says why it stopped)"
}

// msgGoneBeforeAnswer: the daemon on socket took a request and went away
// before answering; asked is what the request asked it to do ("the start
// of train"; "" for a request that changes nothing), which may or may not
// have been done.
func msgGoneBeforeAnswer(socket, asked string) string {
	if asked == "" {
		return fmt.Sprintf("berth: the daemon on %s went away before it answered (berth status says whether it is back; systemctl status berth says why it stopped)", socket)
	}
	return fmt.Sprintf("berth: the daemon on %s went away before it answered: %s may or may not have been done (berth status says, once a daemon answers again; systemctl status berth says why it stopped)", socket, asked)
}

// msgNoAnswerInTime: the daemon on socket took a request and did not
// answer within limit; asked as for msgGoneBeforeAnswer.
func msgNoAnswerInTime(socket, asked string, limit time.Duration) string {
	done := ""
	if asked != "" {
		done = fmt.Sprintf(": %s may or may not have been done", asked)
	}
	return fmt.Sprintf("berth: the daemon on %s did not answer within %s%s; it may be stuck, or stopped (kill -STOP): systemctl status berth says whether it runs, and berth status whether it answers now", socket, accounting.FormatDuration(limit), done)
}

// msgAnswerCut: an answer ended before it was whole.
func msgAnswerCut() string {
	return "berth: the daemon's answer ended before it was whole: the daemon went away (systemctl status berth says why), or closed a connection whose answer was not read for 30 s (a berth stopped with Ctrl-Z, say); ask again"
}

func msgDaemonTooOld(socket, call string) string {
	return fmt.Sprintf("the daemon on %s does not know %s: it is older than this client (berth version shows the client's; restart the daemon after an upgrade: systemctl restart berth)", socket, call)
}

// msgOutputCutShort: the output of job's last run was cut short at at
// (RFC 3339), its log disk full.
func msgOutputCutShort(job, at string) string {
	when := at
	if t, err := time.Parse(time.RFC3339, at); err == nil {
		when = clockTime(t, time.Now())
	}
	return fmt.Sprintf("berth: the output of %s's last run was cut short at %s: what it wrote after is lost, and its last line above may be cut too (berth status says why)", job, when)
}

// msgNeverRan says that a job has no output because it has not run.
func msgNeverRan(job string) string {
	return fmt.Sprintf("berth: %s has not run yet, so there is no output (berth show %s says why)", job, quoteArg(job))
}

// msgNoOutput says that a job, or one of its runs, has written nothing.
func msgNoOutput(job string, run uint64, journal bool) string {
	if run != 0 {
		return fmt.Sprintf("berth: run %d of %s wrote nothing", run, job)
	}
	// Not "yet": it may be done. Nor surely "none written": a log
	// directory that cannot be written keeps none, which the status says;
	// journald drops the oldest lines of a full journal.
	if journal {
		return fmt.Sprintf("berth: no output from %s is kept: its runs wrote none, or journald dropped it, as it drops the oldest lines once its journal is full (berth history %s lists its runs; journalctl --disk-usage)", job, quoteArg(job))
	}
	return fmt.Sprintf("berth: no output from %s is kept: its runs wrote none, or their log files were removed (berth history %s lists them; a log directory that could not be written would be among berth status's errors)", job, quoteArg(job))
}

// msgRunOutputGone: a run's output is no longer in its job's log files
// (the daemon's, without journald), which begin after it: rotated out of
// them, or the files were removed since (to free space, say).
func msgRunOutputGone(job string, run uint64) string {
	return fmt.Sprintf("berth: run %d of %s: its output is no longer kept; the job's log files now begin with later runs' (they are bounded in size, the oldest output dropped first, or were removed since; berth logs %s shows what is kept)", run, job, quoteArg(job))
}

// msgFollowNotDeclared heads berth logs -f of a job no file declares now.
func msgFollowNotDeclared(job string) string {
	return fmt.Sprintf("berth: no job named %s is declared now (its file was removed, or no longer declares it): its earlier output follows, and more only once a job of that name is declared again (Ctrl-C ends the wait)", job)
}

// msgFollowAtRest heads berth logs -f of a job at rest (done, failed,
// stopped…): what follows its output comes once it runs again.
func msgFollowAtRest(job, state string) string {
	again := "berth start " + quoteArg(job)
	switch stateOf(state) {
	case store.StateDisabled:
		again = "enabled = true in its file" // a start is refused (trial AI)
	case store.StateInvalid, store.StateUnplaceable:
		again = "once what keeps it from running is mended: berth show " + quoteArg(job) + " says what"
	}
	return fmt.Sprintf("berth: %s is %s: its output so far follows, and more once it runs again (%s; Ctrl-C ends the wait)", job, state, again)
}

// msgRunOutputStartGone: the start of a run's output is no longer in its
// job's log files: rotated out of them, or the files were removed as it
// ran (trial AT: only the rotation was said); what follows is the rest.
func msgRunOutputStartGone(job string, run uint64) string {
	return fmt.Sprintf("berth: run %d of %s: the start of its output is no longer kept (the job's log files are bounded in size, the oldest output dropped first, or were removed as it ran); what is kept follows", run, job)
}

// msgTailLeftOut: what of the last lines asked for the daemon left out,
// past what it holds of them for one request.
func msgTailLeftOut(job string, lines, bytes int) string {
	var what []string
	if lines > 0 {
		earliest := "the earliest line asked for"
		if lines > 1 {
			earliest = fmt.Sprintf("the earliest %d lines asked for", lines)
		}
		what = append(what, earliest)
	}
	if bytes > 0 {
		what = append(what, fmt.Sprintf("the first %d bytes of the first line shown", bytes))
	}
	return fmt.Sprintf("berth: left out, past what the daemon holds of a job's last lines for one request: %s (berth logs %s without -n streams it all)", strings.Join(what, ", and "), quoteArg(job))
}

func msgWantArgs(command, what string) string {
	return fmt.Sprintf("berth %s: takes %s (berth %s --help shows the usage)", command, what, command)
}

// msgMoreRuns: berth history showed the newest n runs (of which, the
// command line's job or --mine or --owner as given; "" for all), and there
// are more (trial AO: the hint dropped --mine and --owner).
func msgMoreRuns(which string, n int) string {
	more := "berth history -n " + strconv.Itoa(max(100, 5*n))
	if which != "" {
		more = "berth history " + which + " -n " + strconv.Itoa(max(100, 5*n))
	}
	return fmt.Sprintf("berth: the newest %s, and there are more (%s shows more)", count(n, "run"), more)
}

// msgOthersErrors says that the n errors of a reload after a submit are
// in other files than those submitted.
func msgOthersErrors(n int) string {
	if n == 1 {
		return "the error is in another job file, not in what you sent (berth status lists it)"
	}
	return "the errors are in other job files, not in what you sent (berth status lists them)"
}

// msgReloaded says what a reload did: the counts, then the jobs added,
// changed and removed (twenty of each at most); for one that found
// nothing new, what the daemon's last reload that did found, and when.
func msgReloaded(r supervisor.ReloadResult, now time.Time) string {
	var b strings.Builder
	quiet := len(r.Added)+len(r.Changed)+len(r.Removed)+len(r.Quotas)+len(r.Errors)+len(r.Writing) == 0
	switch {
	case quiet && r.Earlier == nil:
		// A reload after the daemon read a file as it was saved.
		return fmt.Sprintf("reloaded %s: nothing changed since the daemon last read them (it reads a job file as it is saved; berth status shows the jobs)", count(r.Files, "file"))
	case quiet:
		// What it did then: the edit just saved was taken (trial AH).
		fmt.Fprintf(&b, "reloaded %s: nothing changed since the daemon last read them (it reads a job file as it is saved; berth status shows the jobs); %s",
			count(r.Files, "file"), lastFound(r.Earlier, now))
		writeJobLists(&b, "  ", r.Earlier.Added, r.Earlier.Changed, r.Earlier.Removed, r.Earlier.Quotas)
		return b.String()
	}
	fmt.Fprintf(&b, "reloaded %s: %d added, %d changed, %d removed, %s",
		count(r.Files, "file"), len(r.Added), len(r.Changed), len(r.Removed), count(len(r.Errors), "error"))
	writeJobLists(&b, "  ", r.Added, r.Changed, r.Removed, r.Quotas)
	if e := r.Earlier; e != nil {
		// Nothing new, errors or not: the edit just saved was taken
		// before (trial AI).
		fmt.Fprintf(&b, "\n  nothing new since the daemon last read them (it reads a job file as it is saved); %s", lastFound(e, now))
		writeJobLists(&b, "    ", e.Added, e.Changed, e.Removed, e.Quotas)
	}
	if len(r.Writing) > 0 {
		fmt.Fprintf(&b, "\n  open for writing, read once closed (its version before stays meanwhile): %s", strings.Join(r.Writing, ", "))
	}
	return b.String()
}

// lastFound says when the daemon last found changes (e), from now.
func lastFound(e *supervisor.ReloadChange, now time.Time) string {
	return fmt.Sprintf("it last found changes at %s (%s ago):",
		e.At.In(renderZone).Format("15:04:05"), accounting.FormatDuration(max(0, now.Sub(e.At)).Round(time.Second)))
}

// writeJobLists writes a line for each of the jobs added, changed and
// removed, and the quotas changed ("*": everyone else's), those there are,
// indented, twenty names of each at most.
func writeJobLists(b *strings.Builder, indent string, added, changed, removed, quotas []string) {
	const most = 20
	for _, l := range []struct {
		what  string
		names []string
	}{{"added", added}, {"changed", changed}, {"removed", removed}, {"quotas changed", quotas}} {
		if len(l.names) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n%s%s: %s", indent, l.what, strings.Join(l.names[:min(len(l.names), most)], ", "))
		if len(l.names) > most {
			fmt.Fprintf(b, " and %d more", len(l.names)-most)
		}
	}
}

func msgInternal(err error) string {
	return "berth: " + err.Error()
}

// msgCannotReadSubmitted says why berth submit cannot read a file it was
// given.
func msgCannotReadSubmitted(path string, err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("berth submit: %s does not exist; name the job file to submit (berth submit FILE.lua)", path)
	case errors.Is(err, os.ErrPermission):
		return fmt.Sprintf("berth submit: %s cannot be read by you (permission denied); submit a file you may read (ls -l %s shows its owner and mode)", path, path)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Sprintf("berth submit: %s is a directory; name the job files in it (berth submit %s/*.lua)", path, strings.TrimSuffix(path, "/"))
	case errors.Is(err, errNotRegular):
		return fmt.Sprintf("berth submit: %s is not a regular file (ls -l %s says what it is); submit a job file, or copy what it gives into one first", path, path)
	}
	return "berth submit: " + err.Error() // a *watch.RefusedError says what fixes it
}

// msgIgnoredName: berth check was given a file the daemon would not read
// in its jobs directory, for its name.
func msgIgnoredName(path, better string) string {
	return fmt.Sprintf("%s: the daemon does not read a file of this name: it reads only files ending in .lua that do not start with a dot (rename it to %s; checked all the same)", path, better)
}

func msgNotJobFileName(path string) string {
	return fmt.Sprintf("berth: %s is not a job file's name: the daemon reads only files ending in .lua that do not start with a dot (rename it)", path)
}

// msgSubmitDir: berth submit takes files; a directory's are named one by
// one (trial AQ: told to rename the directory).
func msgSubmitDir(path string) string {
	return fmt.Sprintf("berth submit: %s is a directory; submit its job files: berth submit %s", path, supervisor.QuoteArg(filepath.Clean(path))+"/*.lua")
}

func msgCannotWriteJobFile(dir string, err error) string {
	return fmt.Sprintf("berth: cannot write into %s: %v (it is your job directory: ls -ld %s shows who may write it)", dir, err, dir)
}

// msgNameRefused: a member of the daemon's group whose login cannot name
// a person's jobs and directory.
func msgNameRefused(user string) string {
	return fmt.Sprintf("berth: %s is of the daemon's group, but has no job directory: a person's login names their jobs (%s/train) and directory, and must be lower-case letters, digits, _, - and ., starting with a letter or _, at most 32 of them; "+
		"an administrator can run jobs as %s from the administrators' jobs directory instead (user = %q)", user, user, user, user)
}

func msgNoJobsDirClient(user, group string) string {
	user = cmp.Or(user, "your user")
	return fmt.Sprintf("%s has no job directory on this daemon: its people are the members of the group %s (ask an administrator: sudo usermod -aG %s %s, then log in again)", user, group, group, user)
}

// msgEditWithoutDir: berth edit of a job by someone with no job directory
// of their own (an administrator outside the daemon's group).
func msgEditWithoutDir(job, file string, me supervisor.Me) string {
	who := cmp.Or(me.User, "your user")
	if me.Admin {
		return fmt.Sprintf("berth: %s is declared in %s; berth edit edits files in your own job directory, and %s has none (not in the group %s): edit that file where it is as root (sudoedit %s), and the daemon reloads it", job, file, who, me.Group, quoteArg(file))
	}
	return fmt.Sprintf("berth: %s is declared in %s; berth edit edits files in your own job directory, and %s has none: its people are the members of the group %s", job, file, who, me.Group)
}

// msgNotInYourDir refuses berth edit of a job declared outside the
// caller's job directory: owner's (another person's, or "" for the
// administrators'), the caller being me, an administrator where admin.
func msgNotInYourDir(job, owner, me, file, dir string, admin bool) string {
	switch {
	case owner != "" && owner != me && admin:
		// Trial BB: "only alice (or an administrator)" to an
		// administrator, refused all the same.
		return fmt.Sprintf("berth: %s is %s's job, declared in %s; berth edit edits your own job directory: edit that file as %s (sudoedit -u %s %s), which keeps it theirs, and the daemon reloads it", job, owner, file, owner, owner, quoteArg(file))
	case owner != "" && owner != me:
		// Trial AL: "edit that file where it is" to one who cannot open it.
		return fmt.Sprintf("berth: %s is %s's job, declared in %s: only %s (or an administrator) can change it", job, owner, file, owner)
	case owner == "":
		return fmt.Sprintf("berth: %s is an administrators' job, declared in %s, not in your job directory %s: an administrator changes it (sudoedit %s)", job, file, dir, quoteArg(file))
	}
	return fmt.Sprintf("berth: %s is declared in %s, not in your job directory %s: edit that file where it is", job, file, dir)
}

func msgEditorFailed(err error, draft string) string {
	return fmt.Sprintf("berth edit: the editor failed: %v (your draft is in %s; set EDITOR to the editor you use)", err, draft)
}

func msgNotWritten(problems int, more bool) string {
	n := count(problems, "problem")
	if more {
		n += " listed, and more"
	}
	return fmt.Sprintf("not written: %s; what is in force stays (fix and submit again: the daemon checks files against the flavors, quotas and jobs in force)", n)
}

// msgEditElsewhere refuses berth edit of a file outside the caller's job
// directory; readable: the caller may read it, and so submit a copy.
func msgEditElsewhere(path, dir string, readable bool) string {
	msg := fmt.Sprintf("berth edit: %s is not in your job directory, %s: berth edit edits the files there, by name (berth edit %s)",
		path, dir, quoteArg(filepath.Base(path)))
	if !readable {
		return msg
	}
	return msg + "; berth submit " + quoteArg(path) + " puts a copy of this one there"
}

func msgEditNewFile(name string) string {
	return fmt.Sprintf("to write a new job file, name it: berth edit %s.lua", quoteArg(name))
}

func msgEditAgain(target string) string {
	return fmt.Sprintf("edit %s again? [Y/n] ", target)
}

func msgEditKept(draft, target string, exists bool) string {
	submit := "berth submit"
	if exists {
		submit = "berth submit --replace" // in place of the file there
	}
	return fmt.Sprintf("berth edit: %s is unchanged; your edit is kept in %s (fix it there, then %s %s)", target, draft, submit, draft)
}

// msgEditRaced: the job file was saved by someone else while berth edit's
// editor was open (exists: it is there now); the edit is kept.
func msgEditRaced(target, draft string, exists bool) string {
	if !exists {
		return fmt.Sprintf("berth edit: %s was removed while you edited it, and is not made again; your edit is kept in %s (berth submit %s puts it there)",
			target, draft, draft)
	}
	return fmt.Sprintf("berth edit: %s was changed while you edited it, and is not written over; your edit is kept in %s (compare: diff %s %s; then berth submit --replace %s, or berth edit again)",
		target, draft, target, draft, draft)
}

// msgMoreJobs ends a job list that berth status --watch cut to fit the
// screen.
func msgMoreJobs(n int) string {
	return fmt.Sprintf("… %s (berth status shows all)", count(n, "more job"))
}

// msgFailedHint follows the jobs in berth status where one failed (job,
// the first): the commands that say why (trial AM: "exit 3" named none).
func msgFailedHint(job string, array bool) string {
	if array {
		return fmt.Sprintf("failed: berth history %s shows its runs, berth logs %s --index N an index's output", quoteArg(job), quoteArg(job))
	}
	return fmt.Sprintf("failed: berth logs %s shows its output, berth history %s its runs", quoteArg(job), quoteArg(job))
}

// msgMoreErrors ends the errors of a screen too short for them.
func msgMoreErrors(n int) string {
	return fmt.Sprintf("  … %s (berth status shows all)", count(n, "more error"))
}

func msgWatchNotTerminal() string {
	return "berth status --watch: the output is not a terminal, and a watch redraws a screen; berth status prints the picture once (whole lines off a terminal), berth status --json the facts, and berth status --watch --json one status a line at each change"
}

// msgWatchStopping and msgWatchNoAnswer head the screen of berth status
// --watch while the daemon is away; the watch goes on, and draws again
// once it answers.
func msgWatchStopping(since string) string {
	return fmt.Sprintf("the daemon is stopping (since %s); the picture below is from then, and is drawn again when it is back (systemctl status berth says why; Ctrl-C ends the watch)", since)
}

func msgWatchNoAnswer(socket, since string) string {
	return fmt.Sprintf("no daemon answers on %s since %s; the picture below is from then, and is drawn again when it is back (systemctl status berth says why; Ctrl-C ends the watch)", socket, since)
}

func msgWatchEnded(socket string) string {
	return fmt.Sprintf("berth: the daemon on %s stopped, and the watch with it (systemctl status berth says why; run the watch again once it is back)", socket)
}

// msgAfter is why job (declared in file) waits for other jobs: each
// parent that does not let it run yet, e.g. "after prep (running, started
// 14:02)" or "after prep, which failed (exit 3); runs when prep succeeds
// (…)".
func msgAfter(job, file string, parents []supervisor.Dependency, now time.Time) string {
	var parts []string
	for _, p := range parents {
		if !p.Satisfied {
			parts = append(parts, msgAfterOne(job, file, p, now))
		}
	}
	return strings.Join(parts, "; ")
}

// msgAfterLeftOut: the status lists only the first of a job's parents.
func msgAfterLeftOut(job string, n int) string {
	jobs := "jobs"
	if n == 1 {
		jobs = "job"
	}
	return fmt.Sprintf("and %d more %s it runs after (berth show %s lists them all)", n, jobs, quoteArg(job))
}

func msgAfterOne(job, file string, p supervisor.Dependency, now time.Time) string {
	name := p.Job
	lead, when := "after "+name, "runs when "+name+" succeeds"
	if p.Kind == "after_any" {
		lead, when = "after_any "+name, "runs when "+name+" ends"
	}
	anyway := "berth start " + quoteArg(job) + " --ignore-deps runs it anyway"
	if p.Service && p.State != "unknown" {
		// What helps depends on why it is not running: a person's stop
		// is undone by a start, a failure is read in its output.
		help := "berth logs " + quoteArg(name)
		switch p.State {
		case "failed":
			// Its restart policy gave up on it: only a start runs it.
			help = "berth logs " + quoteArg(name) + " shows why; berth start " + quoteArg(name) + " starts it again"
		case "stopped":
			help = "berth start " + quoteArg(name) + " starts it"
		case "disabled":
			help = "enabled = false in its file keeps it from running"
		}
		return fmt.Sprintf("%s, a service, which is %s; runs once %s is running (%s)", lead, stateWords(p.State), name, help)
	}
	switch p.State {
	case "running", "starting":
		state := fmt.Sprintf("%s, started %s", p.State, clockTime(p.Since, now))
		if p.State == "starting" {
			state = "starting since " + clockTime(p.Since, now) // not started yet (trial AJ)
		}
		if p.Kind == "after_any" {
			// Not "runs when it ends": other parents may hold it too.
			return fmt.Sprintf("%s (%s), whose end it waits for, however it ends", lead, state)
		}
		return fmt.Sprintf("%s (%s)", lead, state)
	case "failed":
		if p.Array {
			// Its indices have the output: show lists which failed.
			return fmt.Sprintf("%s, whose indices failed; %s (berth show %s lists them, berth restart %s --failed runs them again; %s)",
				lead, when, quoteArg(name), quoteArg(name), anyway)
		}
		return fmt.Sprintf("%s, which failed%s; %s (berth logs %s shows why; %s)", lead, endedHow(p), when, quoteArg(name), anyway)
	case "stopped":
		if p.Array {
			// A start of the whole array runs its done indices again too:
			// what to start is the indices stopped (--stopped).
			return fmt.Sprintf("%s, which has stopped indices; %s (berth start %s --stopped runs them, not the done ones again; berth show %s lists them; %s)",
				lead, when, quoteArg(name), quoteArg(name), anyway)
		}
		return fmt.Sprintf("%s, which was stopped; %s (berth start %s)", lead, when, quoteArg(name))
	case "invalid", "unplaceable", "disabled":
		return fmt.Sprintf("%s, which is %s; %s (berth show %s says why; %s)", lead, p.State, when, quoteArg(name), anyway)
	case "unknown":
		return fmt.Sprintf("%s, which is not declared (declare it, or fix the file that declares it: berth status shows the files' errors; berth check %s checks this one)", lead, quoteArg(file))
	case "waiting":
		if p.Upstream != nil {
			// Held for good further up: that job is what to look at.
			up := msgAfterOne(job, file, *p.Upstream, now)
			return fmt.Sprintf("%s, which waits, held upstream: %s", lead, up)
		}
	case "done":
		if p.Behind == name {
			return fmt.Sprintf("%s, which runs again first: a parent of it ran a new definition (berth show %s)", lead, quoteArg(name))
		}
		if p.Behind != "" {
			// Upstream may have a new definition, or have failed, or be
			// declared by no file (the parent ran past it): berth show of
			// the parent says which (trial AU: said "a new definition"
			// of one that had failed).
			return fmt.Sprintf("%s, which runs again once %s has run to done (berth show %s)", lead, p.Behind, quoteArg(name))
		}
	}
	return fmt.Sprintf("%s (%s)", lead, p.State)
}

// msgHeld answers a plain start, or a restart, of a job that waits for
// its parents.
func msgHeld(verb, job, file string, parents []supervisor.Dependency, now time.Time) string {
	var names []string
	for _, p := range parents {
		if !p.Satisfied {
			names = append(names, p.Job)
		}
	}
	why := msgAfter(job, file, parents, now)
	if !strings.Contains(why, "--ignore-deps") {
		why += " (berth start " + quoteArg(job) + " --ignore-deps runs it anyway)"
	}
	return fmt.Sprintf("%s is held by %s, and a %s does not change that: %s", job, strings.Join(names, " and "), verb, why)
}

// msgGated answers a start or restart of a job at rest that now waits for
// its parents: taken, and what it waits for.
func msgGated(verb, job, file string, parents []supervisor.Dependency, now time.Time) string {
	return fmt.Sprintf("%s: %s requested; it waits now: %s", job, verb, msgAfter(job, file, parents, now))
}

// stateWords is a state as a sentence says it: "in backoff", "waiting".
func stateWords(state string) string {
	if state == "backoff" {
		return "in backoff"
	}
	return state
}

// msgDependency is one parent or dependant as berth show lists it:
// "prep (failed, exit 3)", "serve (running, started 14:02)".
func msgDependency(p supervisor.Dependency, now time.Time) string {
	s := p.Job + " (" + p.State
	switch {
	case p.State == "running" || p.State == "starting":
		s += ", started " + clockTime(p.Since, now)
	case p.State == "failed":
		s += strings.TrimSuffix(strings.Replace(endedHow(p), " (", ", ", 1), ")")
	}
	return s + ")"
}

// endedHow is " (exit 3)", " (SIGKILL)", " (timed out)", or "" when it is
// not known.
func endedHow(p supervisor.Dependency) string {
	switch {
	case p.Reason != "" && p.Reason != "exited" && p.Reason != "failed" && p.Reason != "stopped":
		// What ended it says more than its signal: "timed out", not
		// SIGTERM, which reads as if someone killed it.
		return " (" + p.Reason + ")"
	case p.Signal != "":
		return " (" + p.Signal + ")"
	case p.ExitCode != nil:
		return fmt.Sprintf(" (exit %d)", *p.ExitCode)
	case p.Reason != "":
		return " (" + p.Reason + ")"
	}
	return ""
}

// clockTime is a time of day in the client's zone, with the date when it
// is not the day of now.
func clockTime(t, now time.Time) string { return timeOfDay(t, now, "15:04") }

// secondAt is t to the second, its date too where it is not now's day
// (trial AP: a SIGKILL a stop_timeout of hours away read as today's).
func secondAt(t, now time.Time) string { return timeOfDay(t, now, "15:04:05") }

// timeOfDay is t in layout, after its date where it is not now's day.
func timeOfDay(t, now time.Time, layout string) string {
	t = t.In(renderZone)
	if t.Format("2006-01-02") != now.In(renderZone).Format("2006-01-02") {
		return t.Format("2006-01-02 " + layout)
	}
	return t.Format(layout)
}

// msgAlready: a start or stop found the job as it asked (state).
func msgAlready(job, state string) string {
	return fmt.Sprintf("%s: already %s (berth status shows it)", job, state)
}

// msgControlled confirms a start, stop or restart the daemon took: of a
// job, or of an array's indices (indices > 0).
func msgControlled(job, verb string, array bool, indices int) string {
	if array && indices == 0 {
		return fmt.Sprintf("%s: no index to %s (berth show %s lists its indices by state)", job, verb, quoteArg(job))
	}
	if indices > 0 {
		them := "them"
		if indices == 1 {
			them = "it"
		}
		return fmt.Sprintf("%s: %s requested for %s (berth status shows %s)", job, verb, count(indices, "index"), them)
	}
	return fmt.Sprintf("%s: %s requested (berth status shows it)", job, verb)
}

// msgStopKept confirms a stop of a job that cannot run now: it rests
// stopped once it is enabled, or fixed (once).
func msgStopKept(job, once string) string {
	why := "its file disables it"
	if once == "fixed" {
		why = "its declaration cannot run"
	}
	return fmt.Sprintf("%s: stop requested; %s, and once %s it rests stopped (berth start %s runs it then)", job, why, once, quoteArg(job))
}

// msgStoppedAll confirms berth stop --all: the jobs asked to stop, as
// berth status lists them, and how many indices the arrays among them
// have to stop.
func msgStoppedAll(jobs, arrays, indices int) string {
	if jobs == 0 {
		return "no job to stop: none you may stop holds or waits for the machine (berth status shows how they stand)"
	}
	return jobsCounted(jobs, arrays, indices, "") + ": stop requested (berth status shows them; berth start --all starts them again)"
}

// msgStoppedKept is berth stop --all's word on the runs it stopped that
// no file in force declares: no start brings them back (trial AY).
func msgStoppedKept(runs int) string {
	if runs == 1 {
		return supervisor.MsgRunsKept(1) + ": stop requested (no job runs it again; berth status shows it until it ends)"
	}
	return supervisor.MsgRunsKept(runs) + ": stop requested (no job runs them again; berth status shows them until they end)"
}

// msgAlreadyStoppingAll is berth stop --all's answer where the jobs it
// would stop are all stopping already, to rest stopped.
func msgAlreadyStoppingAll(jobs int) string {
	return fmt.Sprintf("no job to stop: %s stopping already (berth status shows them)", count(jobs, "job"))
}

// msgHeldFromRerun confirms a stop of a job done that was to run again
// after its parents: it rests stopped instead.
func msgHeldFromRerun(job string) string {
	return fmt.Sprintf("%s: stopped, so that it does not run again after its parents; berth start %s runs it", job, quoteArg(job))
}

// msgInLine is a waiting job's place in the machine's queue, behind the
// head: "3rd in line".
func msgInLine(pos int) string {
	suffix := "th"
	switch {
	case pos%100 >= 11 && pos%100 <= 13:
	case pos%10 == 1:
		suffix = "st"
	case pos%10 == 2:
		suffix = "nd"
	case pos%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(pos) + suffix + " in line"
}

// msgStartedAll confirms berth start --all: the jobs asked to start, as
// berth status lists them, and how many stopped indices of the arrays
// among them.
func msgStartedAll(jobs, arrays, indices int) string {
	if jobs == 0 {
		return "no job to start: none you may start rests stopped by berth stop --all (one stopped on its own stays so: berth start JOB starts it; berth status shows how they stand)"
	}
	return jobsCounted(jobs, arrays, indices, " stopped") + ": start requested (berth status shows them)"
}

// jobsCounted is jobs as berth status lists them, and the indices of the
// arrays among them, each what (" stopped"): "3 jobs, one an array (7
// indices in all)".
func jobsCounted(jobs, arrays, indices int, what string) string {
	if arrays == 0 {
		return count(jobs, "job")
	}
	which := "an array"
	if arrays > 1 {
		which = strconv.Itoa(arrays) + " of them arrays"
	} else if jobs > 1 {
		which = "one an array"
	}
	return fmt.Sprintf("%s, %s (%s%s in all)", count(jobs, "job"), which, count(indices, "index"), what)
}

// msgNotStopped: berth start JOB --stopped of a job that is not stopped,
// which it leaves as it is.
func msgNotStopped(job, state string) string {
	return fmt.Sprintf("%s: not stopped but %s, and left so (berth start %s without --stopped runs it)", job, state, quoteArg(job))
}

// msgStartStopped confirms berth start ARRAY --stopped: how many stopped
// indices it starts, or that none was stopped.
func msgStartStopped(array string, n int) string {
	if n == 0 {
		return fmt.Sprintf("no stopped index in %s: nothing to start (berth show %s lists its indices by state)", array, quoteArg(array))
	}
	return fmt.Sprintf("starting %d stopped %s of %s (berth status shows %s)", n, plural(n, "index"), array, map[bool]string{true: "it", false: "them"}[n == 1])
}

// msgRestartFailed confirms berth restart ARRAY --failed: how many failed
// indices it restarts, or that none had failed.
func msgRestartFailed(array string, n int) string {
	if n == 0 {
		return fmt.Sprintf("no failed index in %s: nothing to restart (berth show %s lists its indices by state)", array, quoteArg(array))
	}
	them := "them"
	if n == 1 {
		them = "it"
	}
	return fmt.Sprintf("restarting %d failed %s of %s (berth status shows %s)", n, plural(n, "index"), array, them)
}

// msgForeignUse is one process on card that berth did not start: "card 1:
// 21G used by pid 4242 (python3, carol) — not a berth job".
func msgForeignUse(card string, f supervisor.ForeignUse, off bool) string {
	used := "memory"
	if f.MemoryBytes >= 0 {
		used = accounting.FormatSize(f.MemoryBytes)
	}
	who := cmp.Or(f.Command, "?")
	if f.User != "" {
		who += ", " + f.User
	}
	s := fmt.Sprintf("card %s: %s used by pid %d (%s) — not a berth job", card, used, f.PID, who)
	if off {
		s += "; no job is given the card whole meanwhile"
	}
	return s
}

// msgGPUMemOver warns that --gpu-mem books more of a card than NVML says
// it has.
func msgGPUMemOver(asked int64, card string, has int64) string {
	return fmt.Sprintf("--gpu-mem %s is more than card %s has (%s, as NVML says): shares booked past what it has may run out of memory; leave --gpu-mem out to book what the cards have",
		accounting.FormatSize(asked), card, accounting.FormatSize(has))
}

// msgCardShares says who shares card c by memory, and what is left for
// another share: "card 0 shared: a 10G, b 10G; 4G left for another", and
// what the head of the queue keeps of it.
func msgCardShares(c supervisor.CardStatus) string {
	if len(c.Shares) == 0 && c.KeptFor != "" && c.RoomBytes != nil && c.ShareOfBytes != nil {
		// Free, but for what the head keeps of it (trial AZ: "free",
		// and nothing said).
		return "card " + c.Name + ": " + msgPartKept(c)
	}
	parts := make([]string, len(c.Shares))
	for i, sh := range c.Shares {
		parts[i] = sh.Holder + " " + accounting.FormatSize(sh.Bytes)
	}
	return fmt.Sprintf("card %s shared: %s", c.Name, strings.Join(parts, ", ")) + roomLeft(c)
}

// roomLeft is what is left of shared card c for another share, and what
// the head of the queue keeps of it: "; 4G left for another".
func roomLeft(c supervisor.CardStatus) string {
	switch {
	case c.RoomBytes == nil:
		return ""
	case c.KeptFor != "" && *c.RoomBytes == 0:
		return "; what is left is kept for " + c.KeptFor + ", first in line"
	case c.KeptFor != "":
		return "; " + accounting.FormatSize(*c.RoomBytes) + " left for another, beside what is kept for " + c.KeptFor + ", first in line"
	}
	return "; " + accounting.FormatSize(*c.RoomBytes) + " left for another"
}

// msgOverShare says that a run holds more of its card than its share, ""
// when it does not (or the driver does not say).
func msgOverShare(j supervisor.JobStatus) string {
	if j.GPUMemBytes <= 0 || j.GPUMemUsedBytes == nil || *j.GPUMemUsedBytes <= j.GPUMemBytes || len(j.GPUs) == 0 {
		return ""
	}
	return fmt.Sprintf("holds %s of card %s, over its %s share (gpu_mem): the jobs beside it may run out of memory",
		accounting.FormatSize(*j.GPUMemUsedBytes), j.GPUs[0], accounting.FormatSize(j.GPUMemBytes))
}

// msgRanOverShare says in history that a run held more of its card than
// its share.
func msgRanOverShare(peak, share int64) string {
	return fmt.Sprintf("held %s of its card, over its %s share", accounting.FormatSize(peak), accounting.FormatSize(share))
}

// msgIndexWithoutJob refuses --index N given without the array it is an
// index of.
func msgIndexWithoutJob(command string, n int) string {
	return fmt.Sprintf("berth %s: --index %d names an index of an array: name the array too, e.g. berth %s ARRAY --index %d (berth jobs lists the arrays: those with a number under INDICES)",
		command, n, command, n)
}

// msgIndexTwice refuses --index N for a name that already has an index.
func msgIndexTwice(command, job string, n int) string {
	return fmt.Sprintf("berth %s: %s already names an index; give the index once, either as %s or with --index %d (berth %s --help shows the usage)",
		command, job, job, n, command)
}

// msgGaveUp is the restarts of a job whose policy gave up on it
// (max_restarts), after its last run's end.
func msgGaveUp(restarts int) string {
	if restarts == 0 {
		return "not restarted (max_restarts = 0)"
	}
	return "gave up after " + count(restarts, "restart") + " in a row (max_restarts)"
}

// msgArrayRestarts is an array's restarts in its status line: its
// indices', added up, and whether the restart policy gave up on one.
func msgArrayRestarts(restarts int, gaveUp bool) string {
	r := count(restarts, "restart") + " in all"
	if gaveUp {
		r += "; given up on for an index or more (max_restarts; berth show lists them)"
	}
	return r
}

// msgGaveUpShow is msgGaveUp where berth show names the job.
func msgGaveUpShow(name string, restarts int) string {
	if restarts == 0 {
		return "none: max_restarts = 0; berth start " + quoteArg(name) + " runs it again"
	}
	return strconv.Itoa(restarts) + " in a row; its restart policy gave up (max_restarts); berth start " + quoteArg(name) + " runs it again"
}

// msgRetryIn is when a job in backoff runs again, d from now.
func msgRetryIn(d time.Duration) string {
	if d <= 0 {
		return "runs again now"
	}
	return "runs again in " + accounting.FormatDuration(countdown(d))
}

// countdown is d, a time left, in whole seconds rounded up, as a timer
// shows it: with the AGE beside it, in whole seconds gone (compactAge),
// the two add up to the delay (trial AI: age 2s, and "in 17s" of a 20 s
// stop).
func countdown(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

// msgKillIn is when a stop's SIGKILL comes, d from now (trial AG: the
// stop_timeout said as it stood when the stop began did not count down).
func msgKillIn(d time.Duration) string {
	if d <= 0 {
		return "SIGKILL sent"
	}
	return "SIGKILL in " + accounting.FormatDuration(countdown(d))
}

// msgCheckingDir says which directory a berth check named nothing checks.
func msgCheckingDir(dir string) string {
	return "checking " + dir + " (berth check FILE|DIR... checks others)"
}

// msgLookedFor is the hint of a flavor or a job not declared, checked
// with no daemon to list them: where it was looked for.
func msgLookedFor(read string) string {
	return "no daemon answers to list them: looked for in " + read + "; berth check DIR FILE checks a file beside the directory that declares it"
}

// msgCheckAgainstDaemon says what berth check measures the jobs against
// when a daemon answers: its books, or (machineGiven) the machine the
// flags describe, its flavors and jobs still.
func msgCheckAgainstDaemon(machineGiven bool) string {
	if machineGiven {
		return "checking against the machine the flags describe (what they leave out as found here), with the running daemon's flavors and jobs (berth flavors and berth jobs list them)"
	}
	return "checking against the running daemon's books (berth machine shows them; --cpus, --gpus, --ram, --gpu-mem check against others)"
}
