package accounting

import (
	"strconv"
	"strings"
)

// Count writes a number with its noun, "1 core", "2 cores": every sentence
// of berth's that counts something goes through it (the books', the job
// files', the daemon's and the client's), so that none reads "1 cores".
func Count(n int, noun string) string { return strconv.Itoa(n) + " " + Plural(n, noun) }

// Ranges writes ascending whole numbers (core IDs, array indices) as
// ranges: "2-15", "1,3,5-7"; "" for none.
func Ranges(ids []int) string {
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ids[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	return b.String()
}

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
