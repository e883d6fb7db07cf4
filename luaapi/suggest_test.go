package luaapi

import "testing"

// TestSuggest: a typo's nearest candidate, a swap of two neighbours being
// one edit; nothing for a word near nothing.
func TestSuggest(t *testing.T) {
	fields := []string{"cmd", "cpus", "gpus", "ram", "dir", "env", "description", "timeout"}
	for word, want := range map[string]string{
		"rma":     "ram",
		"gpu":     "gpus",
		"cpsu":    "cpus",
		"CPUS":    "cpus",
		"tiemout": "timeout",
		"desc":    "description",
		"x":       "",
		"zzzzz":   "",
	} {
		if got := Suggest(word, fields); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", word, got, want)
		}
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"rma", "ram", 1}, {"rma", "cmd", 2}, {"kitten", "sitting", 3}, {"ca", "abc", 3}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
