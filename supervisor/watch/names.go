package watch

import "strings"

// IsJobFile reports whether a directory entry called name is a job file.
// Everything else in the jobs directory is ignored without a word, so that
// editors, git and Kubernetes can keep their own files beside the jobs:
// a job file ends in ".lua", is not hidden, and is not an editor leftover.
func IsJobFile(name string) bool {
	switch {
	case !strings.HasSuffix(name, ".lua"):
		return false // notes, READMEs, and vim's "4913" probe
	case strings.HasPrefix(name, "."):
		return false // hidden: ".f.lua.tmp", emacs's ".#f.lua" lock, Kubernetes' "..data"
	}
	// The leftovers "f.lua~", "f.lua.swp" and "f.lua.tmp" fail the suffix
	// test already; they are listed so the rule reads as DESIGN.md states it
	// and survives a change to the suffix test.
	for _, leftover := range []string{"~", ".swp", ".tmp"} {
		if strings.HasSuffix(name, leftover) {
			return false
		}
	}
	return true
}
