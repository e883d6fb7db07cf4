package luaapi

import "strings"

// Suggest returns the candidate a person most likely meant by word: the
// closest by edit distance when it is at most 2 (and less than the word's own
// length, so that "x" does not suggest "dir"), or one that word is a prefix
// of ("desc" for "description"). It returns "" when nothing is near.
// Exported because every "did you mean" of berth's, a mistyped subcommand
// included, should come out of the same rule.
func Suggest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best, bestDist := "", 3
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if w == lc {
			return c // differs only in case
		}
		d := editDistance(w, lc)
		if d < bestDist && d < len(w) {
			best, bestDist = c, d
		}
	}
	if best != "" {
		return best
	}
	if len(w) >= 3 {
		for _, c := range candidates {
			if strings.HasPrefix(strings.ToLower(c), w) {
				return c
			}
		}
	}
	return ""
}

// editDistance is the edit distance between a and b, in bytes (field names
// are ASCII), a swap of two neighbours counting as one edit, as in a typo:
// "rma" is one from "ram", two from "cmd" (the optimal string alignment
// distance).
func editDistance(a, b string) int {
	// Rows i-2, i-1 and i of the table, each len(b)+1 long.
	before, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], before[j-2]+1)
			}
		}
		before, prev, cur = prev, cur, before
	}
	return prev[len(b)]
}
