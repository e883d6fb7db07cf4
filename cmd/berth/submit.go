package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/watch"
)

// berth submit and berth edit put job files where the daemon reads the
// caller's: their own directory (DIR/USER under --user-jobs), or the
// administrators' for root. The daemon checks them first, as the caller's,
// against what is in force: a file that would not load is never written,
// so what runs now goes on.

func runSubmit(c *cli, args []string) int {
	fs := c.flags("submit")
	f := c.clientFlags(fs, false)
	replace := fs.Bool("replace", false, "replace the files of the same names in your job directory (the jobs of theirs the new ones do not declare are stopped)")
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) == 0 {
		fmt.Fprintln(c.stderr, msgWantArgs("submit", "FILE..."))
		return exitUsage
	}
	cl := c.client(f)
	me, code := c.me(cl)
	if code != exitOK {
		return code
	}
	files := make([]supervisor.CheckFile, 0, len(rest))
	given := map[string]string{} // the path each will have → the one given
	wouldReplace := ""           // what a file of the same name, not asked to be replaced, says
	for _, path := range rest {
		name := filepath.Base(path)
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			fmt.Fprintln(c.stderr, msgSubmitDir(path))
			return exitUsage
		}
		if !watch.IsJobFile(name) {
			fmt.Fprintln(c.stderr, msgNotJobFileName(path))
			return exitUsage
		}
		b, err := readSubmitted(path)
		if err != nil {
			fmt.Fprintln(c.stderr, msgCannotReadSubmitted(path, err))
			return exitFailed
		}
		target := filepath.Join(me.JobsDir, name)
		if other, twice := given[target]; twice {
			if bytes.Equal(files[slices.IndexFunc(files, func(f supervisor.CheckFile) bool { return f.Name == name })].Src, b) {
				continue // the same file, given twice
			}
			fmt.Fprintln(c.stderr, msgSubmitSameName(other, path, name))
			return exitUsage
		}
		// A file of that name is replaced only when asked: its jobs that
		// the new one does not declare would be stopped, running or not.
		// (One that cannot be read is left to the write to say why.) Said
		// once the files are checked: --replace would only lead to their
		// errors (trial AQ).
		if old, err := os.ReadFile(target); !*replace && err == nil && !bytes.Equal(old, b) && wouldReplace == "" {
			wouldReplace = msgSubmitWouldReplace(path, target)
		}
		files = append(files, supervisor.CheckFile{Name: name, Src: b})
		given[target] = path
	}
	if _, code := c.checkFiles(cl, files, given); code != exitOK {
		return code
	}
	if wouldReplace != "" {
		fmt.Fprintln(c.stderr, wouldReplace)
		return exitFailed
	}
	for _, file := range files {
		if err := writeJobFile(me.JobsDir, file, me.Owner == ""); err != nil {
			fmt.Fprintln(c.stderr, msgCannotWriteJobFile(me.JobsDir, err))
			return exitFailed
		}
		fmt.Fprintf(c.stdout, "submitted %s\n", filepath.Join(me.JobsDir, file.Name))
	}
	written := make([]string, len(files))
	for i, file := range files {
		written[i] = filepath.Join(me.JobsDir, file.Name)
	}
	return c.reloadAfterWrite(cl, written...)
}

// errNotRegular: what berth submit was given is not a file of bytes (a
// FIFO, a device, a directory), which it would wait on or read for ever.
var errNotRegular = errors.New("not a regular file")

// readSubmitted reads a file given to berth submit: a regular file, of at
// most what the daemon would read of a job file.
func readSubmitted(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case fi.IsDir():
		return nil, syscall.EISDIR
	case !fi.Mode().IsRegular():
		return nil, errNotRegular
	case fi.Size() > watch.DefaultMaxFileBytes:
		// Said with its size: the daemon, sent what is read of it, would
		// know only that it is one byte too many.
		return nil, &watch.RefusedError{Path: path, Named: true, Reason: watch.TooBig, Size: fi.Size(), MaxBytes: watch.DefaultMaxFileBytes}
	}
	return io.ReadAll(io.LimitReader(f, watch.DefaultMaxFileBytes+1))
}

func runEdit(c *cli, args []string) int {
	fs := c.flags("edit")
	f := c.clientFlags(fs, false)
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) != 1 {
		fmt.Fprintln(c.stderr, msgWantArgs("edit", "JOB|FILE.lua"))
		return exitUsage
	}
	cl := c.client(f)
	name := rest[0]
	var me supervisor.Me
	if err := cl.get("/me", nil, &me); err != nil {
		return c.fail(err)
	}
	if me.JobsDir == "" && !me.NameRefused && !strings.HasSuffix(name, ".lua") {
		// No directory of their own, but a job named: an administrator
		// outside the group (trial AE) is told where its file is, not
		// of a directory they never meant.
		var d supervisor.JobDetail
		if cl.get("/jobs/"+url.PathEscape(name), nil, &d) == nil && d.Definition.File != "" {
			fmt.Fprintln(c.stderr, msgEditWithoutDir(d.Status.Name, d.Definition.File, me))
			return exitFailed
		}
	}
	if code := c.mayWrite(me); code != exitOK {
		return code
	}
	// A name ending in .lua is a file of theirs (new or not), given by its
	// name or its path there; otherwise a job, whose file is edited.
	if strings.HasSuffix(name, ".lua") && strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err != nil || filepath.Dir(abs) != filepath.Clean(me.JobsDir) {
			fmt.Fprintln(c.stderr, msgEditElsewhere(name, me.JobsDir, unix.Access(name, unix.R_OK) == nil))
			return exitUsage
		}
		name = filepath.Base(abs)
	}
	if strings.HasSuffix(name, ".lua") && !watch.IsJobFile(name) {
		fmt.Fprintln(c.stderr, msgNotJobFileName(name)) // hidden: the daemon would not read it
		return exitUsage
	}
	if !watch.IsJobFile(name) {
		var d supervisor.JobDetail
		if err := cl.get("/jobs/"+url.PathEscape(name), nil, &d); err != nil {
			var ae *apiError
			if errors.As(err, &ae) && ae.code == supervisor.CodeNoSuchJob {
				c.failCode = ae.code
				fmt.Fprintln(c.stderr, "berth: "+escapeText(ae.msg))
				fmt.Fprintln(c.stderr, msgEditNewFile(name))
				return exitFailed
			}
			return c.fail(err)
		}
		if filepath.Dir(d.Definition.File) != filepath.Clean(me.JobsDir) {
			fmt.Fprintln(c.stderr, msgNotInYourDir(d.Status.Name, d.Status.Owner, me.Owner, d.Definition.File, me.JobsDir, me.Admin))
			return exitFailed
		}
		name = filepath.Base(d.Definition.File)
	}
	target := filepath.Join(me.JobsDir, name)
	// A link is edited through, to the file it leads to, decided now: one
	// that leads elsewhere at the save is not followed there.
	through, err := linkTarget(target)
	if err != nil {
		fmt.Fprintln(c.stderr, "berth edit: "+err.Error())
		return exitFailed
	}
	old, err := os.ReadFile(target)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(c.stderr, "berth edit: "+err.Error())
		return exitFailed
	}
	// The draft has the file's own name, in a directory of its own, so
	// that a draft kept after a refusal can be submitted as it is.
	draftDir, err := os.MkdirTemp("", "berth-edit-")
	if err != nil {
		fmt.Fprintln(c.stderr, "berth edit: "+err.Error())
		return exitFailed
	}
	tmpPath := filepath.Join(draftDir, name)
	if err := os.WriteFile(tmpPath, old, 0o600); err != nil {
		fmt.Fprintln(c.stderr, "berth edit: "+err.Error())
		return exitFailed
	}
	in := bufio.NewReader(c.stdinOr())
	for {
		if err := c.runEditor(tmpPath); err != nil {
			fmt.Fprintln(c.stderr, msgEditorFailed(err, tmpPath))
			return exitFailed
		}
		edited, err := os.ReadFile(tmpPath)
		if err != nil {
			fmt.Fprintln(c.stderr, "berth edit: "+err.Error())
			return exitFailed
		}
		if bytes.Equal(edited, old) && old != nil {
			os.RemoveAll(draftDir)
			fmt.Fprintln(c.stdout, "no change to "+target)
			return exitOK
		}
		if old == nil && len(bytes.TrimSpace(edited)) == 0 {
			// A new file left empty: nothing is written, as an editor
			// quit without saving means.
			os.RemoveAll(draftDir)
			fmt.Fprintln(c.stdout, "nothing written: "+target+" was left empty")
			return exitOK
		}
		file := supervisor.CheckFile{Name: name, Src: edited}
		refused, code := c.checkFiles(cl, []supervisor.CheckFile{file}, nil)
		if code == exitOK {
			// Saved meanwhile by someone else (a colleague, a git pull),
			// or the link pointed elsewhere: theirs is not written over,
			// as crontab -e and visudo do not; the person compares.
			now, err := os.ReadFile(target)
			switch {
			case err != nil && !errors.Is(err, os.ErrNotExist):
				fmt.Fprintln(c.stderr, "berth edit: "+err.Error())
				fmt.Fprintln(c.stderr, msgEditKept(tmpPath, target, old != nil))
				return exitFailed
			case errors.Is(err, os.ErrNotExist) && old != nil || err == nil && (old == nil || !bytes.Equal(now, old)):
				fmt.Fprintln(c.stderr, msgEditRaced(target, tmpPath, err == nil))
				return exitFailed
			}
			if still, err := linkTarget(target); err != nil || still != through {
				fmt.Fprintln(c.stderr, msgEditRaced(target, tmpPath, true))
				return exitFailed
			}
			// Through a link, to the file it leads to (a checkout's): the
			// link stays the link.
			dir, base := me.JobsDir, name
			if through != "" {
				dir, base = filepath.Dir(through), filepath.Base(through)
			}
			if err := writeJobFile(dir, supervisor.CheckFile{Name: base, Src: edited}, me.Owner == ""); err != nil {
				fmt.Fprintln(c.stderr, msgCannotWriteJobFile(dir, err))
				fmt.Fprintln(c.stderr, msgEditKept(tmpPath, target, old != nil))
				return exitFailed
			}
			os.RemoveAll(draftDir)
			if through != "" { // the link kept
				fmt.Fprintln(c.stdout, "saved "+target+", through its link, in "+through)
			} else {
				fmt.Fprintln(c.stdout, "saved "+target)
			}
			return c.reloadAfterWrite(cl, filepath.Join(me.JobsDir, name))
		}
		if !refused {
			// The daemon could not check it: it said why; the edit is kept.
			fmt.Fprintln(c.stderr, msgEditKept(tmpPath, target, old != nil))
			return code
		}
		// Refused: what is in force stays. Edit again, or keep the draft.
		fmt.Fprint(c.stderr, msgEditAgain(target))
		answer, _ := in.ReadString('\n')
		if a := strings.TrimSpace(strings.ToLower(answer)); a == "n" || a == "no" || answer == "" {
			fmt.Fprintln(c.stderr, msgEditKept(tmpPath, target, old != nil))
			return exitFailed
		}
	}
}

// linkTarget is the file a job file that is a link leads to, where the
// caller may write it as their own: theirs, in a directory no one else may
// write in (as the daemon holds job files to). "" for a job file that is
// no link, or not there.
func linkTarget(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return "", nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%s is a link that leads nowhere (%v): fix the link, or remove it (ls -l %s)", path, err, path)
	}
	var file, dir syscall.Stat_t
	if err := syscall.Lstat(real, &file); err != nil {
		return "", err
	}
	if err := syscall.Stat(filepath.Dir(real), &dir); err != nil {
		return "", err
	}
	uid := uint32(os.Geteuid())
	if file.Mode&syscall.S_IFMT != syscall.S_IFREG || file.Uid != uid || dir.Uid != uid && dir.Uid != 0 || dir.Mode&0o022 != 0 {
		return "", fmt.Errorf("%s is a link to %s, which is not a file of yours alone to write (its owner, or who may write in its directory); edit it there yourself, and berth reload", path, real)
	}
	return real, nil
}

// checkFiles asks the daemon what it would make of files. It prints each
// problem and returns refused and exitFailed if there is one; if the daemon
// could not say, it prints why and returns that exit code. A problem that
// starts with the path a file would have is said of the path in given, if
// there is one: the file the person gave.
func (c *cli) checkFiles(cl *client, files []supervisor.CheckFile, given map[string]string) (refused bool, code int) {
	res, code := c.askCheck(cl, files)
	if code != exitOK {
		return false, code
	}
	if len(res.Problems) == 0 {
		return false, exitOK
	}
	for _, p := range res.Problems {
		fmt.Fprintln(c.stderr, escapeText(asGiven(p, given)))
	}
	// A file's errors past those listed are one line ("and 250 more"):
	// counted, they would be one problem.
	listed, more := len(res.Problems), false
	for _, p := range res.Problems {
		if p.Code == luaapi.Truncated.String() {
			listed, more = listed-1, true
		}
	}
	fmt.Fprintln(c.stderr, msgNotWritten(listed, more))
	return true, exitFailed
}

// askCheck has the daemon check files as the caller's, in their job
// directory under their names (POST /v1/check).
func (c *cli) askCheck(cl *client, files []supervisor.CheckFile) (supervisor.CheckResult, int) {
	var res supervisor.CheckResult
	body, err := json.Marshal(supervisor.CheckRequest{Files: files})
	if err != nil {
		fmt.Fprintln(c.stderr, "berth: "+err.Error())
		return res, exitFailed
	}
	if err := cl.send(http.MethodPost, "/check", body, &res); err != nil {
		return res, c.fail(err)
	}
	return res, exitOK
}

// asGiven is problem p's sentence, a file of the job directory named by
// the path it was given as (given: the one in the directory → the one
// given).
func asGiven(p supervisor.Problem, given map[string]string) string {
	if path, ok := given[p.File]; ok && strings.HasPrefix(p.Text, p.File+":") {
		return path + strings.TrimPrefix(p.Text, p.File)
	}
	return p.Text
}

// reloadAfterWrite has the daemon read what was written now (the files
// at paths), rather than at its watcher's next turn, and says what
// changed.
func (c *cli) reloadAfterWrite(cl *client, paths ...string) int {
	var res supervisor.ReloadResult
	if err := cl.post("/reload", &res); err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(c.stdout, msgReloaded(res, time.Now()))
	// The files written were checked, but what the reload says of them
	// is said whole, as is what it says of the machine (the state not
	// recorded); of other files, that it is theirs.
	others := 0
	for _, p := range res.Problems {
		if slices.Contains(paths, p.File) || !p.InAJobFile() {
			fmt.Fprintln(c.stdout, "  "+escapeText(p.Text))
		} else {
			others++
		}
	}
	if others > 0 {
		fmt.Fprintln(c.stdout, "  "+msgOthersErrors(others))
	}
	if len(res.Added) > 0 {
		// A batch job whose definition already ran to done stays done,
		// as after a restart of the daemon: said, or "added" reads as if
		// it would run.
		var jobs []supervisor.JobStatus
		if err := cl.get("/jobs", nil, &jobs); err == nil {
			for _, j := range jobs {
				if j.State == "done" && j.Array == nil && slices.Contains(res.Added, j.Name) {
					fmt.Fprintln(c.stdout, escapeText(msgAddedDone(j.Name)))
				}
			}
		}
	}
	return exitOK
}

// me asks the daemon who the caller is and where their job files go; a
// caller with no job directory is told so (exitFailed), before anything
// is checked or written.
func (c *cli) me(cl *client) (supervisor.Me, int) {
	var me supervisor.Me
	if err := cl.get("/me", nil, &me); err != nil {
		return me, c.fail(err)
	}
	return me, c.mayWrite(me)
}

// mayWrite says whether the caller me has a job directory to write in;
// one who has not is told why (exitFailed).
func (c *cli) mayWrite(me supervisor.Me) int {
	switch {
	case me.NameRefused:
		fmt.Fprintln(c.stderr, msgNameRefused(me.User))
		return exitFailed
	case me.JobsDir == "":
		fmt.Fprintln(c.stderr, "berth: "+msgNoJobsDirClient(me.User, me.Group))
		return exitFailed
	}
	return exitOK
}

// writeJobFile writes a job file into dir whole or not at all: a temporary
// file beside it, renamed over it, so that the daemon never reads half a
// file. The file it replaces keeps its mode, owner, group and ACL (who
// may read a job file may see its definition in berth show); a new one is
// 0600 in a person's directory (theirs alone), 0644 in the
// administrators' (shared, as the people may read its jobs' definitions).
func writeJobFile(dir string, f supervisor.CheckFile, shared bool) error {
	tmp, err := os.CreateTemp(dir, "."+f.Name+".tmp-*")
	if err != nil {
		return err
	}
	err = keepAccess(tmp, filepath.Join(dir, f.Name), shared)
	if err == nil {
		_, err = tmp.Write(f.Src)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, f.Name))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// keepAccess gives tmp the mode, owner, group and ACL of the file at path
// that it is to replace, or, where there is none, the mode of a new one.
func keepAccess(tmp *os.File, path string, shared bool) error {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		if shared {
			return tmp.Chmod(0o644)
		}
		return nil // CreateTemp's 0600
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if err := tmp.Chown(int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		return err
	}
	const acl = "system.posix_acl_access"
	size, err := unix.Lgetxattr(path, acl, nil)
	if err != nil || size <= 0 {
		return nil // none, or none to be had here
	}
	buf := make([]byte, size)
	n, err := unix.Lgetxattr(path, acl, buf)
	if err != nil {
		return nil
	}
	if err := unix.Fsetxattr(int(tmp.Fd()), acl, buf[:n], 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		return err
	}
	return nil
}

// runEditor opens path in $VISUAL, else $EDITOR, else vi, on this
// terminal.
func (c *cli) runEditor(path string) error {
	editor := cmp.Or(c.env.get("VISUAL"), c.env.get("EDITOR"), "vi")
	// The editor may carry arguments ("code --wait"): the shell splits it,
	// as git and crontab do.
	cmd := exec.Command("/bin/sh", "-c", editor+` "$1"`, "sh", path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdinOr(), c.stdout, c.stderr
	return cmd.Run()
}

// stdinOr is the command's standard input: the process's, except in tests.
func (c *cli) stdinOr() io.Reader {
	if c.stdin != nil {
		return c.stdin
	}
	return os.Stdin
}
