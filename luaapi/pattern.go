package luaapi

// Lua 5.1's patterns, matched by a backtracking matcher of our own rather
// than gopher-lua's: a pattern such as ".-.-.-b" on a long subject takes
// time polynomial in the subject, and a builtin that runs to completion
// cannot be stopped by the interpreter's context. This matcher counts its
// steps and looks at a stop function every few thousand of them, so a
// file's CPU budget reaches into a pattern as it does into the VM.

const (
	patternEscape = '%'
	// maxCaptures is Lua's LUA_MAXCAPTURES.
	maxCaptures = 32
	// maxPatternDepth bounds the matcher's recursion, which grows with the
	// pattern's items, not with the subject (Lua 5.2's MAXCCALLS).
	maxPatternDepth = 200
	// stopCheckEvery is how many steps go between two looks at stop.
	stopCheckEvery = 1 << 12
	capUnfinished  = -1
	capPosition    = -2
)

// patternError is a malformed pattern, in Lua's words.
type patternError string

func (e patternError) Error() string { return string(e) }

// patternStopped is raised when stop said the file must end.
type patternStopped struct{}

type capture struct {
	init, len int
}

// matcher is one match of a pattern against a subject.
type matcher struct {
	src, pat string
	level    int
	capture  [maxCaptures]capture
	depth    int
	steps    int
	stop     func() bool
}

func (m *matcher) step() {
	m.steps++
	if m.steps%stopCheckEvery == 0 && m.stop != nil && m.stop() {
		panic(patternStopped{})
	}
}

// matchAt matches pat from p at subject position s, and returns the end of
// the match, or -1.
func (m *matcher) match(s, p int) int {
	m.depth++
	if m.depth > maxPatternDepth {
		panic(patternError("pattern too complex"))
	}
	defer func() { m.depth-- }()
	for {
		m.step()
		if p == len(m.pat) {
			return s
		}
		switch m.pat[p] {
		case '(':
			if p+1 < len(m.pat) && m.pat[p+1] == ')' {
				return m.startCapture(s, p+2, capPosition)
			}
			return m.startCapture(s, p+1, capUnfinished)
		case ')':
			return m.endCapture(s, p+1)
		case patternEscape:
			if p+1 < len(m.pat) {
				switch c := m.pat[p+1]; {
				case c == 'b':
					if s = m.matchBalance(s, p+2); s == -1 {
						return -1
					}
					p += 4
					continue
				case c == 'f':
					p += 2
					if p >= len(m.pat) || m.pat[p] != '[' {
						panic(patternError("missing '[' after '%f' in pattern"))
					}
					ep := m.classEnd(p)
					// Outside the subject is '\0', as in C.
					prev, cur := byte(0), byte(0)
					if s > 0 {
						prev = m.src[s-1]
					}
					if s < len(m.src) {
						cur = m.src[s]
					}
					if m.matchBracketClass(prev, p, ep-1) || !m.matchBracketClass(cur, p, ep-1) {
						return -1
					}
					p = ep
					continue
				case c >= '0' && c <= '9':
					if s = m.matchCapture(s, c); s == -1 {
						return -1
					}
					p += 2
					continue
				}
			}
		case '$':
			if p+1 == len(m.pat) {
				if s == len(m.src) {
					return s
				}
				return -1
			}
		}
		ep := m.classEnd(p)
		matched := s < len(m.src) && m.singleMatch(m.src[s], p, ep)
		if ep < len(m.pat) {
			switch m.pat[ep] {
			case '?':
				if matched {
					if r := m.match(s+1, ep+1); r != -1 {
						return r
					}
				}
				p = ep + 1
				continue
			case '*':
				return m.maxExpand(s, p, ep)
			case '+':
				if !matched {
					return -1
				}
				return m.maxExpand(s+1, p, ep)
			case '-':
				return m.minExpand(s, p, ep)
			}
		}
		if !matched {
			return -1
		}
		s++
		p = ep
	}
}

func (m *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(m.src) && m.singleMatch(m.src[s+i], p, ep) {
		m.step()
		i++
	}
	for ; i >= 0; i-- {
		if r := m.match(s+i, ep+1); r != -1 {
			return r
		}
	}
	return -1
}

func (m *matcher) minExpand(s, p, ep int) int {
	for {
		if r := m.match(s, ep+1); r != -1 {
			return r
		}
		if s < len(m.src) && m.singleMatch(m.src[s], p, ep) {
			s++
			continue
		}
		return -1
	}
}

func (m *matcher) startCapture(s, p, what int) int {
	if m.level >= maxCaptures {
		panic(patternError("too many captures"))
	}
	m.capture[m.level] = capture{init: s, len: what}
	m.level++
	r := m.match(s, p)
	if r == -1 {
		m.level--
	}
	return r
}

func (m *matcher) endCapture(s, p int) int {
	l := m.captureToClose()
	m.capture[l].len = s - m.capture[l].init
	r := m.match(s, p)
	if r == -1 {
		m.capture[l].len = capUnfinished
	}
	return r
}

func (m *matcher) captureToClose() int {
	for l := m.level - 1; l >= 0; l-- {
		if m.capture[l].len == capUnfinished {
			return l
		}
	}
	panic(patternError("invalid pattern capture"))
}

func (m *matcher) matchCapture(s int, digit byte) int {
	l := int(digit) - '1'
	if l < 0 || l >= m.level || m.capture[l].len == capUnfinished {
		panic(patternError("invalid capture index"))
	}
	c := m.capture[l]
	if len(m.src)-s >= c.len && m.src[c.init:c.init+c.len] == m.src[s:s+c.len] {
		m.steps += c.len / 64 // a comparison costs what it reads
		return s + c.len
	}
	return -1
}

func (m *matcher) matchBalance(s, p int) int {
	if p+1 >= len(m.pat) {
		panic(patternError("unbalanced pattern"))
	}
	if s >= len(m.src) || m.src[s] != m.pat[p] {
		return -1
	}
	open, close := m.pat[p], m.pat[p+1]
	depth := 1
	for s++; s < len(m.src); s++ {
		m.step()
		switch m.src[s] {
		case close:
			if depth--; depth == 0 {
				return s + 1
			}
		case open:
			depth++
		}
	}
	return -1
}

// classEnd is the index just after the single-character class at p.
func (m *matcher) classEnd(p int) int {
	c := m.pat[p]
	p++
	switch c {
	case patternEscape:
		if p >= len(m.pat) {
			panic(patternError("malformed pattern (ends with '%')"))
		}
		return p + 1
	case '[':
		if p < len(m.pat) && m.pat[p] == '^' {
			p++
		}
		// The first character is part of the set even if it is ']'.
		for {
			if p >= len(m.pat) {
				panic(patternError("malformed pattern (missing ']')"))
			}
			c := m.pat[p]
			p++
			if c == patternEscape && p < len(m.pat) {
				p++
			}
			if p < len(m.pat) && m.pat[p] == ']' {
				return p + 1
			}
		}
	}
	return p
}

func (m *matcher) singleMatch(c byte, p, ep int) bool {
	switch m.pat[p] {
	case '.':
		return true
	case patternEscape:
		return matchClass(c, m.pat[p+1])
	case '[':
		return m.matchBracketClass(c, p, ep-1)
	}
	return m.pat[p] == c
}

// matchBracketClass matches c against the set from p ('[') to ec (']').
func (m *matcher) matchBracketClass(c byte, p, ec int) bool {
	want := true
	if m.pat[p+1] == '^' {
		want = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case m.pat[p] == patternEscape:
			p++
			if matchClass(c, m.pat[p]) {
				return want
			}
		case m.pat[p+1] == '-' && p+2 < ec:
			p += 2
			if m.pat[p-2] <= c && c <= m.pat[p] {
				return want
			}
		case m.pat[p] == c:
			return want
		}
	}
	return !want
}

// matchClass matches c against the class letter cl (%a, %d…), in the C
// locale; an upper-case letter is the complement, any other character
// stands for itself.
func matchClass(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isAlpha(c)
	case 'c':
		res = c < 0x20 || c == 0x7f
	case 'd':
		res = c >= '0' && c <= '9'
	case 'l':
		res = c >= 'a' && c <= 'z'
	case 'p':
		res = c > 0x20 && c < 0x7f && !isAlpha(c) && !(c >= '0' && c <= '9')
	case 's':
		res = c == ' ' || (c >= '\t' && c <= '\r')
	case 'u':
		res = c >= 'A' && c <= 'Z'
	case 'w':
		res = isAlpha(c) || (c >= '0' && c <= '9')
	case 'x':
		res = (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f')
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cl >= 'A' && cl <= 'Z' {
		return !res
	}
	return res
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// find looks for pat in src from init on, as string.find and string.match
// do: a leading '^' anchors the match at init. It returns the match's start
// and end, or -1, -1; the matcher then holds the captures.
func (m *matcher) find(init int, anchored bool, p int) (int, int) {
	for s := init; s <= len(m.src); s++ {
		m.level = 0
		if e := m.match(s, p); e != -1 {
			return s, e
		}
		if anchored {
			break
		}
	}
	return -1, -1
}

// captureAt is capture i of the match s..e: a substring, or for a position
// capture its 1-based position (isPos). With no captures, capture 0 is the
// whole match.
func (m *matcher) captureAt(i, s, e int) (str string, pos int, isPos bool) {
	if i >= m.level {
		if i != 0 {
			panic(patternError("invalid capture index"))
		}
		return m.src[s:e], 0, false
	}
	c := m.capture[i]
	switch c.len {
	case capUnfinished:
		panic(patternError("unfinished capture"))
	case capPosition:
		return "", c.init + 1, true
	}
	return m.src[c.init : c.init+c.len], 0, false
}

// captures is how many values a match yields: its captures, or the whole
// match when it has none and whole is true.
func (m *matcher) captures(whole bool) int {
	if m.level == 0 && whole {
		return 1
	}
	return m.level
}
