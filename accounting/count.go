package accounting

import "strconv"

// Count writes a number with its noun, "1 core", "2 cores": every sentence
// of berth's that counts something goes through it (the books', the job
// files', the daemon's and the client's), so that none reads "1 cores".
func Count(n int, noun string) string { return strconv.Itoa(n) + " " + Plural(n, noun) }

// Plural is the noun alone, for a label before a list: "card 3", "cards
// 0,1". Every noun berth counts takes an "s" but index.
func Plural(n int, noun string) string {
	switch {
	case n == 1:
		return noun
	case noun == "index":
		return "indices"
	}
	return noun + "s"
}
