package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/watch"
)

func runCheck(c *cli, args []string) int {
	fs := c.flags("check")
	var m machineFlags
	m.register(fs)
	var budget budgetFlag
	budget.register(fs)
	asJSON := fs.Bool("json", false, "print the loaded flavors and jobs, resolved, as JSON")
	socket := fs.String("socket", "", "the daemon whose books, flavors and files in force to check against (env BERTH_SOCKET; default: your own daemon's if one answers, else the system's)")
	targets, code, done := c.parse(fs, args)
	if done {
		return code
	}
	// A daemon that answers places against its books (its --cpus, --gpus,
	// --ram), which the jobs must fit, not against the probe; given, the
	// machine flags describe another, and the daemon's flavors and files
	// in force are still those the files may name (trial AJ: the README's
	// check against the GPU box refused the site's flavors).
	machineGiven := m.given()
	daemon := c.daemonStatus(*socket)
	if daemon != nil && !machineGiven {
		m.fromDaemon(daemon)
	}
	// A check runs no job: a machine larger than this one (the box the
	// files are for, --cpus 64) oversubscribes nothing.
	inv, err := c.inventory(&m, func(kind, text string) {
		if kind != probes.CoresOversubscribed.String() {
			fmt.Fprintln(c.stderr, msgWarning(text))
		}
	})
	if err != nil {
		fmt.Fprintln(c.stderr, msgInventory(err))
		return inventoryExit(err)
	}

	// The rules of a daemon that runs as the caller: root's for root, a
	// person's own daemon's for a person.
	rules := watch.ScanOptions{DaemonUID: os.Getuid()}
	userJobs := peoplesJobs(c.env)
	if _, set := c.env.lookup("BERTH_USER_JOBS"); !set && daemon != nil && daemon.Daemon.PersonJobs > 0 {
		// The people's directories of the daemon that answers (one new
		// enough to say, as it says its bound of a person's jobs).
		userJobs = daemon.Daemon.UserJobs
	}
	// A person of the daemon that answers checks a file of theirs (one
	// they own) as the daemon takes it from them (berth submit): their
	// jobs, their rules. The administrators' files are the
	// administrators'.
	var me supervisor.Me
	if daemon != nil {
		if err := newClient(c.sockets(*socket)...).get("/me", nil, &me); err != nil {
			me = supervisor.Me{}
		}
	}
	if len(targets) == 0 {
		// The caller's own files where the daemon that answers reads them
		// (trial AQ: /etc/berth/jobs.d beside a daemon of --jobs elsewhere).
		targets = []string{defaultJobsDir(c.env)}
		if c.env.get("BERTH_JOBS") == "" && me.JobsDir != "" {
			targets = []string{me.JobsDir}
		}
		fmt.Fprintln(c.stderr, msgCheckingDir(targets[0]))
	}
	// A person's own files, beside the daemon that takes them from them,
	// are checked by it as berth submit has them checked: with their files
	// and quota in force, and their bound of jobs (read here, a file passed
	// that submit then refused). Against another machine they are checked
	// here. With --json, what they declare is read here too, as theirs.
	// Their job directory is its job files (trial AW: checked here, it was
	// held to no quota, where its files named one by one were).
	own := targets
	if daemon != nil && me.Owner != "" && me.JobsDir != "" && !machineGiven {
		own = ownDirFiles(targets, me.JobsDir)
	}
	asSubmitted := daemon != nil && me.Owner != "" && me.JobsDir != "" && !machineGiven && ownJobFiles(own, userJobs, me.Owner, daemon.Daemon.JobsDir)
	if asSubmitted && !*asJSON {
		fmt.Fprintln(c.stderr, msgCheckAgainstDaemon(false))
		return c.checkAsSubmitted(newClient(c.sockets(*socket)...), own, me.JobsDir)
	}
	var srcs []luaapi.Source
	var problems []supervisor.Problem
	// refusedFiles are the files refused unread (their mode, their size),
	// checked all the same: the summary counts them.
	refusedFiles := map[string]bool{}
	for _, target := range targets {
		// What is in a person's job directory is theirs, as the system
		// daemon evaluates it: their jobs, their rules, their quota.
		owner, ownerUID := personOf(userJobs, target)
		if owner == "" && me.Owner != "" && (ownedByCaller(target) || asSubmitted) {
			owner = me.Owner
		}
		if asSubmitted {
			// Read as berth submit reads it: its bytes are what the
			// daemon is given, wherever it lies (trial AS: a colleague's
			// directory was held to the administrators' rules).
			b, err := readSubmitted(target)
			if err != nil {
				problems = append(problems, supervisor.Problem{Code: "unreadable", File: target, Text: msgCheckTarget(target, err)})
				continue
			}
			srcs = append(srcs, luaapi.Source{Path: target, Src: b, Owner: owner})
			continue
		}
		rules := rules
		rules.Owner = ownerUID
		got, refused, err := readTarget(target, rules)
		if err != nil {
			problems = append(problems, supervisor.Problem{Code: "unreadable", File: target, Text: msgCheckTarget(target, err)})
			continue
		}
		if owner == "" {
			refused = personDirHint(target, refused)
		}
		for i := range got {
			got[i].Owner = owner
		}
		for _, p := range refused {
			if p.Code == supervisor.ProblemFileRefused {
				refusedFiles[p.File] = true
			}
		}
		srcs = append(srcs, got...)
		problems = append(problems, refused...)
	}
	if daemon != nil && (len(srcs) > 0 || len(refusedFiles) > 0) {
		fmt.Fprintln(c.stderr, msgCheckAgainstDaemon(machineGiven))
	}
	// Files named outside the jobs directory are checked against the
	// flavors it declares, as the daemon would load them beside them.
	checked := len(srcs)
	// A person's directory is read beside the administrators' files as a
	// file is: it declares no flavor of its own.
	lentTo := slices.DeleteFunc(slices.Clone(targets), func(t string) bool {
		owner, _ := personOf(userJobs, t)
		return owner != ""
	})
	lenderDir := c.flavorLender(daemon, me)
	lentSrcs := flavorContext(lentTo, lenderDir, rules, srcs)
	srcs = append(srcs, lentSrcs...)
	// Evaluated as the daemon evaluates them: in a child the kernel
	// bounds, so that checking a hostile file is as safe as loading it.
	// (One File per source, in order.)
	// What the files checked print goes to stderr, as the daemon logs it;
	// not what the jobs directory's files lent to them print (trial AM).
	lender := map[string]bool{}
	for _, src := range srcs[checked:] {
		lender[src.Path] = true
	}
	printed := hclog.New(&hclog.LoggerOptions{Name: "berth check", Output: c.stderr, Level: hclog.Info, DisableTime: true,
		Exclude: func(_ hclog.Level, _ string, args ...any) bool {
			for i := 0; i+1 < len(args); i += 2 {
				if path, ok := args[i+1].(string); ok && args[i] == "file" && lender[path] {
					return true
				}
			}
			return false
		}})
	files := newEvaluator(printed, budget.d).Evaluate(context.Background(), luaMachine(inv), srcs)
	checkedFiles, around := files[:checked], files[checked:]
	elsewhere := declaredElsewhere(checkedFiles, around, daemon)
	// Whose jobs' user and group are had as: the daemon's that answers,
	// but on another machine, which the flags describe, this one's.
	asUser := daemon
	if machineGiven {
		asUser = nil
	}
	group := cmp.Or(me.Group, supervisor.DefaultGroup)
	set, found := checkCombined(checkedFiles, around, daemon, asUser, elsewhere, inv, group, nil)
	problems = append(problems, found...)
	// A file with errors is refused whole; what of it had none is checked
	// beside the rest all the same, for its own problems (the others are
	// checked without it, as the daemon loads them), so that one run says
	// every mistake.
	if lenient, partials := luaapi.LenientFiles(checkedFiles); len(partials) > 0 {
		_, more := checkCombined(lenient, around, daemon, asUser, elsewhere, inv, group, partials)
		for _, p := range more {
			if _, refused := partials[p.File]; refused {
				problems = append(problems, p)
			}
		}
	}
	if asSubmitted {
		// What the daemon finds is what berth submit would (trial AR:
		// --json passed a file past its owner's quota), its evaluation
		// of the same bytes included.
		asked, _, code := c.problemsAsSubmitted(newClient(c.sockets(*socket)...), targets, me.JobsDir)
		if code != exitOK {
			return code
		}
		problems = asked
	}
	supervisor.SortProblems(problems)
	if daemon == nil {
		// berth flavors and berth jobs ask a daemon: none answers.
		read := "the files checked"
		if !slices.ContainsFunc(lentTo, isDir) {
			read = "the files checked and " + lenderDir // read beside them, if it is there
		}
		for i := range problems {
			problems[i].Text = unanswered(problems[i], read)
		}
	}

	if *asJSON {
		if code := c.writeJSON(checkReport(set, problems)); code != exitOK {
			return code
		}
	} else {
		for _, p := range problems {
			fmt.Fprintln(c.stdout, escapeText(p.Text)) // a file's name is its author's
		}
		fmt.Fprintln(c.stdout, msgCheckSummary(len(set.Files)+len(refusedFiles), len(set.Jobs), len(set.Flavors), len(problems)))
	}
	if len(problems) > 0 {
		return exitFailed
	}
	return exitOK
}

// unanswered rewords the hint of a problem that names a flavor or a job
// not declared, where no daemon answers to list them: they were looked
// for in read.
func unanswered(p supervisor.Problem, read string) string {
	for code, hint := range map[string]string{"unknown_flavor": "berth flavors lists them", "unknown_job": "berth jobs lists them"} {
		if p.Code == code {
			return strings.Replace(p.Text, hint, msgLookedFor(read), 1)
		}
	}
	return p.Text
}

// checkCombined combines the checked files with what the jobs directory
// (the files around them) lends them, and returns what is loaded of the checked files and
// their problems: the rules across files, the jobs' parents and flavors
// (a parent named elsewhere, or declared with a mistake of its own by a
// refused file, whose partial is in partials, is no problem), and what the
// daemon would find before a start (feasibility): the jobs' users had as
// asUser's (nil: this machine's).
func checkCombined(checked, around []*luaapi.File, daemon, asUser *supervisor.Status, elsewhere map[string]bool, inv probes.Inventory, group string,
	partials map[string]*luaapi.Partial) (*luaapi.Set, []supervisor.Problem) {
	lentFiles := lent(around, checked)
	set, problems := combineInForce(append(slices.Clone(checked), lentFiles...), len(checked), daemon)
	for _, e := range set.Errors {
		problems = append(problems, supervisor.ProblemOf(e))
	}
	for _, e := range set.Problems {
		if e.Problem == luaapi.UnknownJob && elsewhere[e.Other] || partials[e.Pos.File].Excuses(e) {
			continue // a parent declared in a file not checked, or with a mistake
		}
		problems = append(problems, supervisor.ProblemOf(e))
	}
	problems = append(problems, feasibility(set, inv, group, asUser)...)
	if len(lentFiles) > 0 {
		// What the jobs directory lent is not what was checked.
		isLent := func(path string) bool {
			return slices.ContainsFunc(lentFiles, func(f *luaapi.File) bool { return f.Path == path })
		}
		set.Files = slices.DeleteFunc(set.Files, func(f *luaapi.File) bool { return isLent(f.Path) })
		set.Jobs = slices.DeleteFunc(set.Jobs, func(j luaapi.Job) bool { return isLent(j.Pos.File) })
		set.Flavors = slices.DeleteFunc(set.Flavors, func(f luaapi.Flavor) bool { return isLent(f.Pos.File) })
		problems = slices.DeleteFunc(problems, func(p supervisor.Problem) bool { return isLent(p.File) })
	}
	return set, problems
}

// combineInForce applies the rules that span files to files, the first
// checked of them those checked and the rest what the jobs directory lends
// them. Among the checked files alone, without a daemon, a name declared
// in two files is an error on the file that sorts later, as at a daemon's
// first start. Beside a daemon, or what the jobs directory lends, a name
// stays where it is in force, as a reload keeps it (supervisor.AdmitFile):
// what the jobs directory lends, and the files that hold a job in the
// daemon, are admitted first, and the file that declares one of their
// names again is the one refused, whichever sorts first. A
// person's file that would take their files past the daemon's bound of
// jobs (the default without a daemon, or from one too old to say) is
// refused as the daemon refuses it. The problems are those of the files
// refused so.
func combineInForce(files []*luaapi.File, checked int, daemon *supervisor.Status) (*luaapi.Set, []supervisor.Problem) {
	set := luaapi.Combine(files)
	nameTaken := (daemon != nil || checked < len(files)) && slices.ContainsFunc(set.Errors, func(e *luaapi.Error) bool { return e.Problem == luaapi.NameTaken })
	bound := supervisor.DefaultPersonJobs
	if daemon != nil {
		bound = cmp.Or(daemon.Daemon.PersonJobs, bound)
	}
	if !nameTaken && !supervisor.OverPersonJobs(files, bound) {
		return set, nil
	}
	// The daemon names its files by their absolute paths, links
	// resolved; a file checked may be named otherwise (berth check jobs.d).
	holds := map[string]bool{}
	if daemon != nil {
		for _, j := range daemon.Jobs {
			holds[resolved(j.File)] = true
		}
	}
	order := slices.Clone(files)
	for i := checked; i < len(order); i++ {
		holds[resolved(order[i].Path)] = true
	}
	held := make(map[string]bool, len(order)) // by the path as checked
	for _, f := range order {
		held[f.Path] = holds[resolved(f.Path)]
	}
	slices.SortStableFunc(order, func(a, b *luaapi.File) int {
		ha, hb := held[a.Path], held[b.Path]
		switch {
		case ha && !hb:
			return -1
		case hb && !ha:
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})
	admitted := map[string]*luaapi.File{}
	var failing, refused []*luaapi.File
	var taken []supervisor.Problem
	for _, f := range order {
		if len(f.Errors) > 0 {
			failing = append(failing, f) // its own errors, as they are
			continue
		}
		if why := supervisor.AdmitFile(admitted, f.Path, f, bound); why != nil {
			taken = append(taken, why...)
			refused = append(refused, &luaapi.File{Path: f.Path, Hash: f.Hash}) // checked all the same
		}
	}
	set = luaapi.Combine(append(slices.Collect(maps.Values(admitted)), failing...))
	set.Files = append(set.Files, refused...)
	slices.SortFunc(set.Files, func(a, b *luaapi.File) int { return strings.Compare(a.Path, b.Path) })
	return set, taken
}

// declaredElsewhere are the jobs that files not checked declare: those of
// the jobs directory lent (its flavors are loaded beside the files
// checked, not its jobs), and those of the daemon that answers, but for
// the jobs of the files checked, which they replace. A job checked may
// wait for any of them.
func declaredElsewhere(checked, lent []*luaapi.File, daemon *supervisor.Status) map[string]bool {
	names := map[string]bool{}
	for _, f := range lent {
		for _, j := range f.Jobs {
			names[j.Name] = true
		}
	}
	if daemon == nil {
		return names
	}
	replaced := map[string]bool{}
	for _, f := range checked {
		replaced[resolved(f.Path)] = true
	}
	for _, j := range daemon.Jobs {
		if !replaced[resolved(j.File)] {
			names[j.Name] = true
		}
	}
	return names
}

// resolved is path made absolute, its links resolved, where it can be;
// otherwise path as it is.
func resolved(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}

// flavorLender is the jobs directory whose flavors a file checked on its
// own may name: the caller's own daemon's; for a person who has none, the
// system daemon's, which their submitted files are loaded beside. Where
// BERTH_JOBS does not say which that is, the daemon that answered (nil:
// none) names its own, its --jobs not always the default: in its status,
// or, one too old to say it there, in what it tells an administrator (me).
func (c *cli) flavorLender(daemon *supervisor.Status, me supervisor.Me) string {
	if c.env.get("BERTH_JOBS") == "" && daemon != nil {
		if daemon.Daemon.JobsDir != "" {
			return daemon.Daemon.JobsDir
		}
		if me.Owner == "" && me.JobsDir != "" {
			return me.JobsDir
		}
	}
	dir := defaultJobsDir(c.env)
	if c.env.uid == 0 || c.env.get("BERTH_JOBS") != "" || c.adminJobs == "" {
		return dir
	}
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return c.adminJobs
	}
	return dir
}

// flavorContext reads the jobs directory's files when no target is it,
// nor in it, nor a directory at all: a file checked on its own may name a
// flavor declared there. Nothing of them is reported; one that cannot be
// read is passed over.
func flavorContext(targets []string, jobsDir string, rules watch.ScanOptions, checked []luaapi.Source) []luaapi.Source {
	if slices.ContainsFunc(targets, isDir) {
		return nil
	}
	got, _, err := readTarget(jobsDir, rules)
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(got, func(src luaapi.Source) bool {
		return slices.ContainsFunc(checked, func(c luaapi.Source) bool { return sameFile(c.Path, src.Path) })
	})
}

// isDir says whether a target is a directory, or cannot be looked at.
func isDir(target string) bool {
	info, err := os.Stat(target)
	return err != nil || info.IsDir()
}

// lent keeps of the jobs directory's files (context) their flavors and
// jobs: the checked files may name them, a cycle through them is one the
// checked files close, and a checked file that declares one of their
// names again is refused, as the daemon would refuse it (trial AM: a new
// file that took a job's name passed). A file checked of the same name as
// one of them is that file's new version, edited elsewhere to be copied
// over it: that one lends nothing. What they declare is not reported on,
// nor listed as checked.
func lent(context, checked []*luaapi.File) []*luaapi.File {
	var out []*luaapi.File
	for _, f := range context {
		if len(f.Errors) > 0 || len(f.Flavors)+len(f.Jobs) == 0 || slices.ContainsFunc(checked, sameName(f.Path)) {
			continue
		}
		out = append(out, &luaapi.File{Path: f.Path, Hash: f.Hash, Flavors: f.Flavors, Jobs: f.Jobs})
	}
	return out
}

// sameName is whether a file checked is named for path's file: its base
// name, or one the daemon would read it as ("train.lua.new", "train.txt":
// jobFileName; the review).
func sameName(path string) func(*luaapi.File) bool {
	base := filepath.Base(path)
	return func(f *luaapi.File) bool {
		b := filepath.Base(f.Path)
		return b == base || jobFileName(b) == base
	}
}

// sameFile reports whether two paths name one file.
func sameFile(a, b string) bool {
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

// jobFileName is a name the daemon reads for a file named name: "x.lua"
// for "x.txt", ".x.lua", "x.lua~", "x.LUA" or "x.lua.bak".
func jobFileName(name string) string {
	n := strings.TrimLeft(name, ".")
	if i := strings.Index(strings.ToLower(n), ".lua"); i > 0 {
		return n[:i] + ".lua"
	}
	return cmp.Or(strings.TrimSuffix(n, filepath.Ext(n)), "job") + ".lua"
}

// readTarget reads one argument of `berth check`: a directory's job
// files, or one file named outright (whatever its name). Both are read by
// the daemon's rules (package watch): what the daemon would refuse is a
// problem, worded as the daemon words it, and never read, so a FIFO does
// not hang the check, a device is not read without end, and nothing of a
// file the daemon would not read is shown. The error is for a target that
// cannot be looked at at all.
func readTarget(target string, rules watch.ScanOptions) ([]luaapi.Source, []supervisor.Problem, error) {
	info, err := os.Stat(target) // a stat neither opens nor reads
	if err != nil {
		return nil, nil, err
	}
	if !info.IsDir() {
		src, err := watch.ReadJobFile(target, rules)
		var refused *watch.RefusedError
		switch {
		case errors.As(err, &refused):
			return nil, []supervisor.Problem{refusal(target, refused)}, nil
		case err != nil:
			return nil, nil, err
		}
		var problems []supervisor.Problem
		if name := filepath.Base(target); !watch.IsJobFile(name) {
			// Checked all the same: it may be a draft, to be renamed.
			problems = append(problems, supervisor.Problem{Code: "ignored", File: target, Text: msgIgnoredName(target, jobFileName(name))})
		}
		return []luaapi.Source{{Path: target, Src: src}}, problems, nil
	}

	scan, err := watch.NewScanner(target, rules).Scan()
	switch {
	case err != nil:
		return nil, nil, err
	case scan.DirRefused != nil:
		var refused *watch.RefusedError
		if errors.As(scan.DirRefused, &refused) {
			return nil, []supervisor.Problem{refusal(target, refused)}, nil
		}
		return nil, nil, scan.DirRefused
	case scan.DirMissing:
		return nil, nil, fs.ErrNotExist // gone since the stat
	}
	var problems []supervisor.Problem
	for path, err := range scan.Refused {
		var refused *watch.RefusedError
		if errors.As(err, &refused) {
			problems = append(problems, refusal(path, refused))
		}
	}
	// Lexical order, as the daemon loads them: it decides which of two
	// files declaring one name is the later.
	var srcs []luaapi.Source
	for _, path := range slices.Sorted(maps.Keys(scan.Changed)) {
		srcs = append(srcs, luaapi.Source{Path: path, Src: scan.Changed[path]})
	}
	return srcs, problems, nil
}

// refusal is a problem for a file or directory the daemon would not read.
func refusal(path string, err *watch.RefusedError) supervisor.Problem {
	code := supervisor.ProblemFileRefused
	if err.Dir {
		code = supervisor.ProblemDirRefused
	}
	if err.Reason == watch.Unreadable && !err.Dir && errors.Is(err.Err, fs.ErrPermission) && os.Getuid() != 0 {
		// A file of a directory checked that the caller may not read:
		// as for a file named, the daemon reads it as root.
		named := *err
		named.Named = true
		err = &named
	}
	return supervisor.Problem{Code: code, File: path, Text: err.Error()}
}

// personOf says whose job directory target is in, when it is in one of
// userJobs' (DIR/USER, or a file there): the person's name and uid. ""
// and 0 for anything else.
func personOf(userJobs, target string) (string, int) {
	if userJobs == "" {
		return "", 0
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return "", 0
	}
	dir := abs
	if info, err := os.Stat(abs); err == nil && !info.IsDir() {
		dir = filepath.Dir(abs)
	}
	spool, err := filepath.Abs(userJobs)
	if err != nil || filepath.Dir(dir) != spool {
		return "", 0
	}
	u, err := user.Lookup(filepath.Base(dir))
	if err != nil {
		return "", 0
	}
	uid, _ := strconv.Atoi(u.Uid)
	return u.Username, uid
}

// personDirHint: a directory checked as the administrators', refused for
// being a person's (owned by them, named for them), is most likely a
// person's job directory outside where the people's are looked for: the
// problem about it says how to check it as theirs, where its chown would
// take it from them.
func personDirHint(target string, refused []supervisor.Problem) []supervisor.Problem {
	fi, err := os.Stat(target)
	if err != nil || !fi.IsDir() {
		return refused
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 || int(st.Uid) == os.Getuid() {
		return refused
	}
	u, err := user.LookupId(strconv.Itoa(int(st.Uid)))
	if err != nil || u.Username != filepath.Base(filepath.Clean(target)) {
		return refused
	}
	for i, p := range refused {
		if filepath.Clean(p.File) == filepath.Clean(target) {
			refused[i].Text = msgPersonDirElsewhere(target, u.Username)
		}
	}
	return refused
}

// ownJobFiles says whether targets are job files that would be the
// caller's, each of a name of its own: not in another person's job
// directory, and not the administrators' (in their jobs directory,
// adminDir, or, where that is not known, owned by another). A file the
// caller does not own is theirs once they submit it (trial AQ: a copied
// example passed a check as an administrator's, and submit refused it).
func ownJobFiles(targets []string, userJobs, owner, adminDir string) bool {
	names := map[string]bool{}
	for _, t := range targets {
		fi, err := os.Stat(t)
		if err != nil || !fi.Mode().IsRegular() || !watch.IsJobFile(filepath.Base(t)) || names[filepath.Base(t)] {
			return false
		}
		if !ownedByCaller(t) && (adminDir == "" || inDir(adminDir, t)) {
			return false
		}
		if person, _ := personOf(userJobs, t); person != "" && person != owner {
			return false
		}
		names[filepath.Base(t)] = true
	}
	return len(targets) > 0
}

// ownDirFiles is targets with the caller's own job directory, dir, given
// as its job files (as the daemon reads them: regular files of a job
// file's name), so that they are checked as theirs.
func ownDirFiles(targets []string, dir string) []string {
	var out []string
	for _, t := range targets {
		if !isDir(t) || !sameFile(t, dir) {
			out = append(out, t)
			continue
		}
		entries, err := os.ReadDir(t)
		if err != nil {
			out = append(out, t) // said as it is read
			continue
		}
		for _, e := range entries {
			if e.Type().IsRegular() && watch.IsJobFile(e.Name()) {
				out = append(out, filepath.Join(t, e.Name()))
			}
		}
	}
	return out
}

// inDir says whether path is in dir, or below it, links resolved.
func inDir(dir, path string) bool {
	d, err1 := filepath.EvalSymlinks(dir)
	p, err2 := filepath.EvalSymlinks(path)
	if err1 != nil || err2 != nil {
		return true // cannot tell: taken to be
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// checkAsSubmitted has the daemon check targets as the caller's files in
// their job directory, dir, as berth submit would write them, and says
// what it found, each problem of a file by the path it was given as.
func (c *cli) checkAsSubmitted(cl *client, targets []string, dir string) int {
	problems, jobs, code := c.problemsAsSubmitted(cl, targets, dir)
	if code != exitOK {
		return code
	}
	for _, p := range problems {
		fmt.Fprintln(c.stdout, escapeText(p.Text))
	}
	fmt.Fprintln(c.stdout, msgCheckSummary(len(targets), jobs, 0, len(problems)))
	if len(problems) > 0 {
		return exitFailed
	}
	return exitOK
}

// problemsAsSubmitted is what the daemon finds in targets as the caller's
// files in dir (checkAsSubmitted), each problem of a file by the path it
// was given as, and how many jobs they declare; a file that cannot be
// read is the one problem.
func (c *cli) problemsAsSubmitted(cl *client, targets []string, dir string) ([]supervisor.Problem, int, int) {
	files, given, err := submittedFiles(targets, dir)
	if err != nil {
		return []supervisor.Problem{{Code: "unreadable", Text: err.Error()}}, 0, exitOK
	}
	res, code := c.askCheck(cl, files)
	if code != exitOK {
		return nil, 0, code
	}
	for i, p := range res.Problems {
		res.Problems[i].Text = asGiven(p, given)
		if path, ok := given[p.File]; ok {
			res.Problems[i].File = path
		}
	}
	return res.Problems, len(res.Jobs), exitOK
}

// submittedFiles reads targets as berth submit would give them to the
// daemon, and maps the paths they would have in dir to those given.
func submittedFiles(targets []string, dir string) ([]supervisor.CheckFile, map[string]string, error) {
	files := make([]supervisor.CheckFile, 0, len(targets))
	given := map[string]string{}
	for _, t := range targets {
		b, err := readSubmitted(t)
		if err != nil {
			return nil, nil, errors.New(msgCheckTarget(t, err))
		}
		files = append(files, supervisor.CheckFile{Name: filepath.Base(t), Src: b})
		given[filepath.Join(dir, filepath.Base(t))] = t
	}
	return files, given, nil
}

// ownedByCaller says whether path is the caller's own file or directory.
func ownedByCaller(path string) bool {
	var st syscall.Stat_t
	return syscall.Stat(path, &st) == nil && int(st.Uid) == os.Getuid()
}

// feasibility reports, for every loaded job, what the daemon would find
// before starting it: that it could ever fit this machine and its owner's
// quota (as the files checked declare them), and that its user and group
// exist and the daemon that answers (nil: none) may run it as them; and
// that each quota names an account, a misspelt one suggested from the
// members of group.
func feasibility(set *luaapi.Set, inv probes.Inventory, group string, daemon *supervisor.Status) []supervisor.Problem {
	placer := accounting.NewPlacer(time.Now)
	placer.AddMachine(supervisor.CapacityOf(inv))
	placer.SetQuotas(set.QuotaLimits())
	var out []supervisor.Problem
	for i := range set.Jobs {
		j := &set.Jobs[i]
		if p, unfit := supervisor.UnfitProblem(placer, j, set); unfit && !set.Unsized(j.Name) {
			out = append(out, p)
		}
		if j.User == "" && j.Group == "" {
			continue
		}
		_, err := supervisor.LookupCredentials(j.User, j.Group)
		if daemon != nil {
			// As the daemon that answers would run it: one not running as
			// root runs a job as none but itself.
			err = supervisor.CredentialsErrorAs(uint32(daemon.Daemon.UID), uint32(daemon.Daemon.GID), j.User, j.Group)
		}
		if err != nil {
			out = append(out, supervisor.CredentialsProblem(j, err))
		}
	}
	return append(out, supervisor.QuotaProblems(set, groupMembers(group))...)
}

// groupMembers are the members of group as listed, for suggestions; none
// where it cannot be read.
func groupMembers(group string) []string {
	g, err := user.LookupGroup(group)
	if err != nil {
		return nil
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return nil
	}
	_, names, _ := watch.SystemAccounts{}.Group(gid)
	return names
}

func luaMachine(inv probes.Inventory) luaapi.Machine {
	return luaapi.Machine{
		CPUs:     inv.CPUs,
		GPUs:     len(inv.GPUs),
		RAMBytes: inv.RAM.Bytes,
		RAMKnown: inv.RAM.Known,
		Hostname: inv.Hostname,
	}
}

// checkJSON is `berth check --json`; its keys are part of the interface.
type checkJSON struct {
	Files   []string                   `json:"files"`
	Flavors []supervisor.FlavorView    `json:"flavors"`
	Jobs    []supervisor.JobDefinition `json:"jobs"`
	Errors  []messageJSON              `json:"errors"`
}

// messageJSON is a problem: a status problem's facts, its sentence as
// message.
type messageJSON struct {
	Code    string `json:"code"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Job     string `json:"job,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func checkReport(set *luaapi.Set, problems []supervisor.Problem) checkJSON {
	out := checkJSON{Files: []string{}, Flavors: []supervisor.FlavorView{}, Jobs: []supervisor.JobDefinition{}, Errors: []messageJSON{}}
	for _, f := range set.Files {
		out.Files = append(out.Files, f.Path)
	}
	usedBy := map[string][]string{}
	for i := range set.Jobs {
		j := &set.Jobs[i]
		out.Jobs = append(out.Jobs, supervisor.DefinitionOf(j))
		if j.Flavor != "" {
			usedBy[j.Flavor] = append(usedBy[j.Flavor], j.Name)
		}
	}
	for _, f := range set.Flavors {
		out.Flavors = append(out.Flavors, supervisor.FlavorOf(f, usedBy[f.Name]))
	}
	for _, p := range problems {
		out.Errors = append(out.Errors, messageJSON{Code: p.Code, File: p.File, Line: p.Line, Kind: p.Kind, Job: p.Job, Field: p.Field, Message: p.Text})
	}
	return out
}
