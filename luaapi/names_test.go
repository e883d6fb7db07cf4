package luaapi

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestNameShapes: each hand-written shape says what its regular
// expression, as the comment on them gives it, would.
func TestNameShapes(t *testing.T) {
	for _, tt := range []struct {
		name  string
		shape namePattern
		re    string
	}{
		{"job", jobNameShape, `^[a-z0-9][a-z0-9_.-]{0,63}$`},
		{"flavor", flavorNameShape, `^[a-z][a-z0-9_-]{0,63}$`},
		{"env key", envKeyShape, `^[A-Za-z_][A-Za-z0-9_]*$`},
		{"user", userNameShape, `^[a-z_][a-z0-9_-]{0,31}$`},
	} {
		re := regexp.MustCompile(tt.re)
		check := func(s string) {
			if got, want := tt.shape.MatchString(s), re.MatchString(s); got != want {
				t.Errorf("%s %q: %v, want %v as %s says", tt.name, s, got, want, tt.re)
			}
		}
		for _, s := range []string{"", "a", "A", "0", "_", "-", ".", "a-b.c_d", "Train", "x\n",
			strings.Repeat("a", 31), strings.Repeat("a", 32), strings.Repeat("a", 33),
			strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("A", 500), "é", "a\x00"} {
			check(s)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const alphabet = "azAZ09_.-/ é\x00\n"
		for range 20000 {
			b := make([]byte, rng.IntN(70))
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			check(string(b))
		}
	}
}
