package main

import (
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// What a job writes, and what a job file or its process puts into a why or
// an error, reaches the person's terminal through berth logs and berth
// status. A terminal acts on control sequences rather than showing them:
// a job could clear the screen, move the cursor to overwrite the line
// above, retitle the window, or (on some terminals) make it answer back
// into the shell. So berth writes such characters visibly instead:
//
//   - C0 controls and DEL as \x1b, \x07…; \r as \r unless it ends a line
//     (\r\n); in logs \n and \t are kept, the text's own lines and columns;
//   - C1 controls (U+0080–U+009F), which some terminals take for ESC
//     sequences, and the bidirectional overrides and isolates, which can
//     make text read in another order than it is ("Trojan Source"), as
//     \u009b, \u202e…;
//   - bytes that are not UTF-8 as \xff.
//
// A backslash is written as it is, so the escaping is for reading, not
// reversible: `berth logs --raw` gives the bytes, and `--json` the facts.

// escaping is how much is escaped.
type escaping uint8

const (
	escapeLines escaping = 1 // logs: keep \n, \t and \r\n
	escapeAll   escaping = 2 // one line of a picture: every control
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// escapeText is s with every control character written visibly, for text
// laid out on one line.
func escapeText(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			out, _ := appendEscaped(nil, []byte(s), escapeAll, true)
			return string(out)
		}
	}
	return s // plain ASCII, the usual case: no copy
}

// appendEscaped appends p to dst escaped. Unless final, an incomplete
// UTF-8 sequence or a \r at the end of p is returned as rest, to be put
// before the next write: the rest of it may come with the next read.
func appendEscaped(dst, p []byte, how escaping, final bool) (out, rest []byte) {
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			switch {
			case how == escapeLines && (c == '\n' || c == '\t'):
				dst = append(dst, c)
			case how == escapeLines && c == '\r' && i+1 == len(p) && !final:
				return dst, p[i:]
			case how == escapeLines && c == '\r' && i+1 < len(p) && p[i+1] == '\n':
				dst = append(dst, c)
			case c == '\r':
				dst = append(dst, `\r`...)
			case c == '\n':
				dst = append(dst, `\n`...)
			case c == '\t':
				dst = append(dst, `\t`...)
			case c < 0x20 || c == 0x7f:
				dst = fmt.Appendf(dst, `\x%02x`, c)
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		if !final && !utf8.FullRune(p[i:]) {
			return dst, p[i:]
		}
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = fmt.Appendf(dst, `\x%02x`, c)
		case hiddenRune(r):
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, p[i:i+size]...)
		}
		i += size
	}
	return dst, nil
}

// hiddenRune reports whether a terminal would act on r, or show text in
// another order than it is, rather than show r.
func hiddenRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || // C1 controls
		r >= 0x202a && r <= 0x202e || // bidirectional embeddings and overrides
		r >= 0x2066 && r <= 0x2069 // bidirectional isolates
}

// escapeWriter escapes what is written through it, for a job's output on
// a terminal. Close writes what it still holds.
type escapeWriter struct {
	w    io.Writer
	rest []byte // the start of a character or a \r, held until more comes
	buf  []byte
}

func (e *escapeWriter) Write(p []byte) (int, error) {
	in := p
	if len(e.rest) > 0 {
		in = append(e.rest, p...)
	}
	var rest []byte
	e.buf, rest = appendEscaped(e.buf[:0], in, escapeLines, false)
	e.rest = append([]byte(nil), rest...)
	if _, err := e.w.Write(e.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (e *escapeWriter) Close() error {
	if len(e.rest) == 0 {
		return nil
	}
	out, _ := appendEscaped(nil, e.rest, escapeLines, true)
	e.rest = nil
	_, err := e.w.Write(out)
	return err
}
