package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection enforces the direction of imports in DESIGN.md, so it
// cannot drift: cmd → supervisor → {luaapi, accounting, probes}, luaapi →
// accounting for its value types, and nothing of ours below that. Edges
// between our packages are checked through every dependency (go list
// -deps); what a package may do itself (I/O, processes) through its own
// imports, since the standard library's internals use os everywhere.
func TestImportDirection(t *testing.T) {
	const mod = "github.com/berthd/berth/"
	type rule struct{ dep, why string }
	ours := map[string][]rule{
		"accounting": {{mod, "accounting imports nothing of berth's: it is the books, usable by anyone"}},
		"probes":     {{mod, "probes imports nothing of berth's: it only reads what the machine has"}},
		"luaapi": {
			{mod + "supervisor", "luaapi turns Lua into plain values; it starts nothing"},
			{mod + "probes", "luaapi is given the machine by its caller, so tests can pretend"},
		},
		"supervisor": {{mod + "cmd", "the supervisor is a library; cmd/ composes it, never the reverse"}},
	}
	own := map[string][]rule{
		"accounting": {
			{"os", "accounting does no I/O: the books are pure and replayable"},
			{"os/exec", "accounting does no I/O"},
			{"net", "accounting does no I/O"},
			{"github.com/yuin/gopher-lua", "accounting knows nothing of Lua"},
		},
		"probes": {{"os/exec", "probes reads files under a root; it runs nothing"}},
		"luaapi": {
			{"os/exec", "luaapi starts nothing"},
			{"net", "luaapi talks to nothing"},
		},
	}
	list := func(format, pkg string) []string {
		out, err := exec.Command("go", "list", format, mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	check := func(pkg string, deps []string, rules []rule) {
		for _, dep := range deps {
			if dep == mod+pkg {
				continue
			}
			for _, r := range rules {
				if dep == r.dep || strings.HasSuffix(r.dep, "/") && strings.HasPrefix(dep, r.dep) {
					t.Errorf("%s imports %s: %s", pkg, dep, r.why)
				}
			}
		}
	}
	for pkg, rules := range ours {
		deps := list("-deps", pkg)
		if len(deps) < 2 {
			t.Fatalf("go list -deps %s listed nothing", pkg)
		}
		check(pkg, deps, rules)
	}
	for pkg, rules := range own {
		check(pkg, list("-f={{join .Imports \" \"}}", pkg), rules)
	}
}
