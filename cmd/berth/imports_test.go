package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// mod is berth's module path. The rules name packages in full, as go list
// does, so that "testing" (the standard library's) and mod+"/probes"
// (ours) cannot be taken for each other.
const mod = "github.com/berthd/berth"

// importRule is what the packages at or under one path must not depend on,
// and why. A forbidden path forbids every package under it too.
type importRule struct {
	// deps are forbidden anywhere among a package's dependencies, direct
	// or not (go list -deps).
	deps map[string]string
	// allow are the exceptions to deps: paths under a forbidden one that
	// may be depended on all the same.
	allow []string
	// imports are forbidden among a package's own imports only: for the
	// standard library's I/O packages, which the standard library itself
	// imports everywhere (fmt imports os).
	imports map[string]string
	// stdOnly, where set, is why nothing outside the standard library may
	// be a dependency.
	stdOnly string
}

// importRules are the direction of imports in DESIGN.md — cmd → supervisor
// → {luaapi, accounting, probes}, luaapi → accounting for its value types,
// and nothing of ours below that — and what each package must never do,
// in the manner of Tailscale's tstest/deptest. A rule on a path holds for
// every package at or under it (the rule on supervisor holds for
// supervisor/runner), and never forbids what is under its own path (runner
// may have packages of its own).
//
// Every path named here must exist, so that a rename cannot silently turn
// a rule off: rename the rule with the package.
var importRules = map[string]importRule{
	mod + "/accounting": {
		deps: map[string]string{
			mod:                             "accounting imports nothing of berth's: it is the books, usable by anyone",
			"github.com/yuin/gopher-lua":    "accounting knows nothing of Lua",
			"github.com/hashicorp/go-hclog": "the books do not log: they answer, and the caller logs what was decided",
			"go.etcd.io/bbolt":              "the books are in memory; what is stored is the supervisor's",
			prometheus:                      "the books export nothing: the supervisor's collector reads a snapshot of them at each scrape",
		},
		imports: map[string]string{
			"os":      "accounting does no I/O: the books are pure and replayable",
			"os/exec": "accounting does no I/O",
			"net":     "accounting does no I/O",
		},
	},
	mod + "/probes": {
		deps: map[string]string{
			mod:        "probes imports nothing of berth's: it only reads what the machine has",
			prometheus: "probes reads the machine for the books; the daemon's own metrics are the supervisor's",
		},
		imports: map[string]string{
			"os/exec": "probes reads files under a root; it runs nothing",
			"net":     "probes reads files under a root; it talks to nothing",
		},
	},
	mod + "/luaapi": {
		deps: map[string]string{
			mod:                 "luaapi turns Lua into plain values; of berth's packages it uses only accounting's value types",
			mod + "/probes":     "luaapi is given the machine by its caller, so tests can pretend",
			mod + "/supervisor": "luaapi turns Lua into plain values; it starts nothing and stores nothing",
			"go.etcd.io/bbolt":  "luaapi stores nothing: a file's values live as long as the caller keeps them",
			prometheus:          "luaapi is also berth check's, a short command with nothing to scrape",
		},
		allow: []string{mod + "/accounting"},
		imports: map[string]string{
			"os/exec": "luaapi starts nothing",
			"net":     "luaapi talks to nothing",
		},
	},
	mod + "/supervisor": {
		deps: map[string]string{
			mod + "/cmd": "the supervisor is a library; cmd/ composes it, never the reverse",
			"github.com/coreos/go-systemd/v22/daemon": "sd_notify is cmd/'s: the supervisor is handed a Notify function",
		},
		imports: map[string]string{
			"os/signal": "signals are cmd/'s: the daemon is told to reload and stop through its methods",
		},
	},
	mod + "/supervisor/runner": {
		deps: map[string]string{
			mod + "/supervisor":             "runner starts processes and writes their logs; the supervisor drives it, and what a run meant (the store, the jobs directory) is the supervisor's",
			mod + "/luaapi":                 "runner knows nothing of Lua: it is given argv, environment and directory",
			"github.com/yuin/gopher-lua":    "runner knows nothing of Lua",
			mod + "/accounting":             "runner knows nothing of the books: a grant reaches it as environment variables",
			mod + "/probes":                 "runner is told what to run; what the machine has is the supervisor's question",
			"go.etcd.io/bbolt":              "runner reports how a run ended; recording it is the store's",
			"github.com/hashicorp/go-hclog": "runner never logs: it returns what happened and the caller logs it",
			prometheus:                      "runner counts nothing: it returns what happened and the supervisor counts it",
		},
		// clock imports nothing of ours and decides nothing: a timer on
		// it may be injected here as in the supervisor.
		allow: []string{mod + "/supervisor/clock"},
	},
	mod + "/supervisor/units": {
		deps: map[string]string{
			mod + "/supervisor":             "units starts and follows runs as systemd units; the supervisor drives it, and what a run meant is the supervisor's",
			mod + "/luaapi":                 "units knows nothing of Lua: it is given the program, its environment and its limits",
			"github.com/yuin/gopher-lua":    "units knows nothing of Lua",
			mod + "/accounting":             "units knows nothing of the books: a grant reaches it as limits on the unit",
			"go.etcd.io/bbolt":              "units reports how a run ended; recording it is the store's",
			"github.com/hashicorp/go-hclog": "units never logs: it returns what happened and the caller logs it",
			prometheus:                      "units counts nothing: it returns what happened and the supervisor counts it",
		},
		// A run's end is told as runner's Exit, so that both runners end
		// runs alike.
		allow: []string{mod + "/supervisor/runner"},
		imports: map[string]string{
			"os/exec": "units asks systemd to start runs; it forks nothing",
		},
	},
	mod + "/supervisor/watch": {
		deps: map[string]string{
			mod + "/supervisor":             "watch reads the jobs directory and says what changed; running jobs (runner), storing them (the store) and reloading are the supervisor's",
			mod + "/accounting":             "watch decides nothing about resources: it hands over bytes, the supervisor asks the books",
			mod + "/luaapi":                 "watch hands over the files' bytes; evaluating them is luaapi's, called by the supervisor",
			"github.com/yuin/gopher-lua":    "watch knows nothing of Lua",
			mod + "/probes":                 "watch reads the jobs directory, not the machine",
			"go.etcd.io/bbolt":              "watch remembers the last scan in memory; what is stored is the supervisor's",
			"github.com/hashicorp/go-hclog": "watch logs through the Logf its caller gives it",
		},
		// clock imports nothing of ours and decides nothing: a timer on
		// it may be injected here as in the supervisor.
		allow: []string{mod + "/supervisor/clock"},
		imports: map[string]string{
			"os/exec": "watch reads a directory; it runs nothing",
			"net":     "watch reads a directory; it talks to nothing",
		},
	},
	mod + "/supervisor/store": {
		deps: map[string]string{
			mod + "/supervisor":             "the store keeps records; what they mean (the jobs, their runs, the reloads) is the supervisor's, which drives it",
			mod + "/luaapi":                 "the store keeps records, not definitions: a definition is stored as its fingerprint",
			"github.com/yuin/gopher-lua":    "the store knows nothing of Lua",
			mod + "/accounting":             "the store records grants as plain values; deciding them is the books'",
			mod + "/probes":                 "the store records; what the machine has is the supervisor's question",
			"github.com/hashicorp/go-hclog": "the store never logs: it reports its health through OnHealth and its errors to its callers",
			prometheus:                      "the store tells each commit's time through OnCommit; measuring and exporting it is the supervisor's",
		},
		// The writer's recovery timer runs on the daemon's clock.
		allow: []string{mod + "/supervisor/clock"},
		imports: map[string]string{
			"os/exec": "the store runs nothing",
			"net":     "the store talks to nothing",
		},
	},
	mod + "/supervisor/ctlsock": {
		deps: map[string]string{
			mod + "/supervisor": "ctlsock caps the control socket's connections; what is served over it, and the words of a refusal, are the supervisor's",
			mod + "/luaapi":     "ctlsock knows nothing of jobs",
			mod + "/accounting": "ctlsock knows nothing of the books",
			mod + "/probes":     "ctlsock knows nothing of the machine",
			"go.etcd.io/bbolt":  "ctlsock counts connections in memory; it stores nothing",
		},
		imports: map[string]string{
			"os/exec": "ctlsock runs nothing",
		},
	},
	mod + "/supervisor/clock": {
		deps: map[string]string{
			mod: "clock is the time and its timers, real or fake; it knows nothing of jobs, runs or the books",
		},
	},
	mod + "/supervisor/testkit": {
		stdOnly: "testkit is used by the tests of every package, accounting's and probes' too: it must bring none of ours (a cycle) and nothing else (a dependency)",
	},
	mod + "/cmd": {
		deps: map[string]string{
			"testing":                   "the testing package is for tests: linked into a program it registers -test.* flags and its code",
			"net/http/httptest":         "a test kit: never in a program",
			mod + "/supervisor/testkit": "a test kit: for _test.go files only",
		},
	},
}

// prometheus is the client library's module: only the supervisor, which
// owns the daemon's registry, exports metrics.
const prometheus = "github.com/prometheus"

// depGraph is what go list says of every package in the build of ours,
// tests left out: its imports, and whether it is the standard library's.
type depGraph struct {
	imports map[string][]string
	std     map[string]bool
	ours    []string
}

func loadDepGraph(t *testing.T) *depGraph {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Standard}}\t{{join .Imports \" \"}}", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list -deps %s/...: %v", mod, err)
	}
	g := &depGraph{imports: map[string][]string{}, std: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			t.Fatalf("go list printed %q", sc.Text())
		}
		g.imports[f[0]] = strings.Fields(f[2])
		g.std[f[0]] = f[1] == "true"
		if under(f[0], mod) {
			g.ours = append(g.ours, f[0])
		}
	}
	slices.Sort(g.ours)
	if len(g.ours) < 5 || len(g.imports) < 50 {
		t.Fatalf("go list listed %d packages of ours and %d in all", len(g.ours), len(g.imports))
	}
	return g
}

// deps is every package pkg depends on, each with the first package on the
// shortest way to it from pkg (its predecessor), so that a chain can be told.
func (g *depGraph) deps(pkg string) map[string]string {
	from := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g.imports[p] {
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	delete(from, pkg)
	return from
}

// chain is the way from pkg to dep, as "pkg → a → dep".
func chain(from map[string]string, dep string) []string {
	var c []string
	for p := dep; p != ""; p = from[p] {
		c = append(c, p)
	}
	slices.Reverse(c)
	return c
}

// under reports whether pkg is path or a package under it.
func under(pkg, path string) bool {
	return pkg == path || strings.HasPrefix(pkg, path+"/")
}

// short names our packages without the module path.
func short(pkg string) string {
	if pkg == mod {
		return "berth"
	}
	return strings.TrimPrefix(pkg, mod+"/")
}

// forbidden says why dep is forbidden by r, or "" where it is not. The
// most specific path decides.
func (r importRule) forbidden(dep string) string {
	for _, a := range r.allow {
		if under(dep, a) {
			return ""
		}
	}
	why, longest := "", -1
	for path, w := range r.deps {
		if under(dep, path) && len(path) > longest {
			why, longest = w, len(path)
		}
	}
	return why
}

// TestImportRules enforces importRules on every package of the module, so
// that the direction of imports cannot drift. Edges between packages are
// checked through every dependency (go list -deps); what a package may do
// itself (I/O, processes) through its own imports.
func TestImportRules(t *testing.T) {
	g := loadDepGraph(t)
	checkRulesExist(t, g)
	for _, pkg := range g.ours {
		deps := g.deps(pkg)
		for at, r := range importRules {
			if !under(pkg, at) {
				continue
			}
			for dep := range deps {
				if under(dep, at) {
					continue // a rule never forbids what is under its own path
				}
				c := chain(deps, dep)
				if why := r.forbidden(dep); why != "" {
					// Reported once, at the first forbidden package on the way.
					if !slices.ContainsFunc(c[1:len(c)-1], func(p string) bool { return !under(p, at) && r.forbidden(p) != "" }) {
						t.Errorf("%s depends on %s (%s): %s", short(pkg), short(dep), strings.Join(mapShort(c), " → "), why)
					}
				}
				if r.stdOnly != "" && !g.std[dep] && !slices.ContainsFunc(c[1:len(c)-1], func(p string) bool { return !under(p, at) && !g.std[p] }) {
					t.Errorf("%s depends on %s (%s), which is not the standard library's: %s", short(pkg), short(dep), strings.Join(mapShort(c), " → "), r.stdOnly)
				}
			}
			for _, imp := range g.imports[pkg] {
				if why, ok := r.imports[imp]; ok {
					t.Errorf("%s imports %s: %s", short(pkg), imp, why)
				}
			}
		}
	}
}

func mapShort(pkgs []string) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = short(p)
	}
	return out
}

// checkRulesExist fails for every path in importRules that names no
// package: a rule on a package that was renamed or moved would otherwise
// hold of nothing, silently.
func checkRulesExist(t *testing.T, g *depGraph) {
	t.Helper()
	var paths []string
	for at, r := range importRules {
		paths = append(paths, at)
		paths = append(paths, r.allow...)
		for p := range r.deps {
			paths = append(paths, p)
		}
		for p := range r.imports {
			paths = append(paths, p)
		}
	}
	// Most are in the build already; go list is asked about the rest (a
	// package forbidden to all, such as a test kit, is in no build).
	var ask []string
	for _, p := range paths {
		known := false
		for pkg := range g.imports {
			if under(pkg, p) {
				known = true
				break
			}
		}
		if !known && !slices.Contains(ask, p) {
			ask = append(ask, p)
		}
	}
	if len(ask) == 0 {
		return
	}
	slices.Sort(ask)
	out, err := exec.Command("go", append([]string{"list", "-e", "-f", "{{.ImportPath}}\t{{with .Error}}{{printf \"%q\" .Err}}{{end}}"}, ask...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", ask, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, quoted, _ := strings.Cut(sc.Text(), "\t")
		if quoted == "" {
			continue
		}
		problem, err := strconv.Unquote(quoted)
		if err != nil {
			problem = quoted
		}
		problem, _, _ = strings.Cut(problem, "\n")
		problem = strings.TrimSuffix(problem, "; to add it:")
		t.Errorf("an import rule names %s, which is no package (go list: %s): rename the rule with the package it was about", path, problem)
	}
}
