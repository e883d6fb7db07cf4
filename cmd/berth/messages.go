package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor"
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

func msgUnknownCommand(name string, known []string) string {
	if s := luaapi.Suggest(name, known); s != "" {
		return fmt.Sprintf("berth: unknown command %q (did you mean %q?); berth help lists the commands", name, s)
	}
	return fmt.Sprintf("berth: unknown command %q; berth help lists the commands", name)
}

func msgUsage(command string, err error) string {
	return fmt.Sprintf("%s: %v (%s --help shows the usage)", command, err, command)
}

func msgUnexpectedArgs(command string, args []string) string {
	return fmt.Sprintf("berth %s: unexpected argument %q; it takes none but flags (berth %s --help shows the usage)", command, args[0], command)
}

func msgWarning(s string) string { return "berth: warning: " + s }

func msgInventory(err error) string {
	var fe flagError
	if errors.As(err, &fe) {
		return "berth: " + fe.Error()
	}
	return "berth: cannot tell what this machine has: " + err.Error() + " (give --cpus N to say it)"
}

func msgCheckTarget(target string, err error) string {
	if os.IsNotExist(err) {
		return fmt.Sprintf("%s: no such file or directory; name a job file or a directory of them (berth check FILE|DIR...)", target)
	}
	if os.IsPermission(err) {
		return fmt.Sprintf("%s: permission denied; berth check reads files as you (sudo berth check %s)", target, target)
	}
	return fmt.Sprintf("%s: %v", target, err)
}

func msgJobUnplaceable(pos luaapi.Pos, job string, err *accounting.UnplaceableError) string {
	return fmt.Sprintf("%s: job %q %v (berth machine shows what it has)", posString(pos), job, err)
}

func msgJobCredentials(pos luaapi.Pos, job string, err error) string {
	return fmt.Sprintf("%s: job %q: %v", posString(pos), job, err)
}

func msgCheckSummary(files, jobs, flavors, errs int) string {
	return fmt.Sprintf("%s, %s, %s, %s", count(files, "file"), count(jobs, "job"), count(flavors, "flavor"), count(errs, "error"))
}

func posString(p luaapi.Pos) string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return p.File
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func msgSocket(path string, err error) string {
	if errors.Is(err, errNotSocket) {
		return fmt.Sprintf("berth: control socket %s: a file that is not a socket is in the way; berth does not remove it (move it, or give --socket PATH)", path)
	}
	if errors.Is(err, errSocketLive) {
		return fmt.Sprintf("berth: control socket %s: another berth daemon is listening on it (systemctl status berth, or berth status)", path)
	}
	return fmt.Sprintf("berth: cannot listen on control socket %s: %v (give --socket PATH, or set BERTH_SOCKET)", path, err)
}

func msgOpenState(err error) string {
	var locked *supervisor.StateLockedError
	if errors.As(err, &locked) {
		return "berth: " + locked.Error()
	}
	return fmt.Sprintf("berth: cannot open the state: %v (give --state DIR, or set BERTH_STATE)", err)
}

func msgNoDaemon(socket string) string {
	return fmt.Sprintf("berth: no daemon answers on %s; start one with systemctl start berth, or berth daemon (give --socket PATH or set BERTH_SOCKET if it listens elsewhere)", socket)
}

func msgSocketDenied(socket string) string {
	return fmt.Sprintf("berth: permission denied on %s: the daemon answers root, its own user and the group berth (sudo usermod -aG berth $USER, then log in again)", socket)
}

func msgDaemonTooOld(socket, call string) string {
	return fmt.Sprintf("the daemon on %s does not know %s: it is older than this client (berth version shows the client's; restart the daemon after an upgrade: systemctl restart berth)", socket, call)
}

func msgWantArgs(command, what string) string {
	return fmt.Sprintf("berth %s: takes %s (berth %s --help shows the usage)", command, what, command)
}

func msgReloaded(r supervisor.ReloadResult) string {
	return fmt.Sprintf("reloaded %s: %d added, %d changed, %d removed, %s",
		count(r.Files, "file"), len(r.Added), len(r.Changed), len(r.Removed), count(len(r.Errors), "error"))
}

func msgRunNeedsJournal(path string) string {
	return fmt.Sprintf("berth logs: --run needs journald; without it every run's output is in one file, %s (berth history shows when each run started)", path)
}

func msgNoSuchRun(job string, run uint64) string {
	return fmt.Sprintf("berth: job %q has no run %d among its last 100 (berth history %s lists them)", job, run, job)
}

func msgCannotReadLog(path string, err error) string {
	return fmt.Sprintf("berth: cannot read %s: %v (the daemon writes it; sudo berth logs may read it)", path, err)
}

func msgInternal(err error) string {
	return "berth: " + err.Error()
}
