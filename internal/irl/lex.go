package irl

import (
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // identifier or keyword; text is the name without a leading ^
	tString         // text is the raw source with quotes, val the decoded value
	tInt            // text is the source
	tFloat          // text is the source
	tAt             // @name; text is the name
	tPunct          // one of { } : , . = [ ] *
)

type token struct {
	kind    tokKind
	text    string
	val     string
	pos     Pos
	end     int  // offset just past the token
	escaped bool // an identifier written with ^ or in backquotes (never a keyword)
	quoted  bool // an identifier written in backquotes (any characters)
	doc     string
}

// describe renders the token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tString:
		return "string " + t.text
	case tAt:
		return "@" + t.text
	case tPunct:
		return "'" + t.text + "'"
	}
	return t.text
}

type lexer struct {
	file      string
	src       string
	off       int
	line      int
	lineStart int
	doc       string
	out       *token // where next puts the token
}

func newLexer(file, src string) *lexer {
	lx := &lexer{file: file, src: src, line: 1}
	if strings.HasPrefix(src, "\uFEFF") {
		lx.off = 3
		lx.lineStart = 3
	}
	return lx
}

// next scans the next token into dst. Comments are dropped; the text of
// the last doc comment (/** … */) before a token is attached to it. At the
// end of the input it returns EOF tokens.
func (lx *lexer) next(dst *token) *Error {
	lx.out = dst
	if err := lx.skip(); err != nil {
		return err
	}
	if lx.off >= len(lx.src) {
		*dst = token{kind: tEOF, pos: lx.pos(lx.off), end: lx.off, doc: lx.doc}
		lx.doc = ""
		return nil
	}
	return lx.token()
}

func (lx *lexer) pos(off int) Pos {
	return Pos{File: lx.file, Offset: off, Line: lx.line, Col: off - lx.lineStart + 1}
}

func (lx *lexer) errorf(p Pos, format string, args ...any) *Error {
	return newError(p, format, args...)
}

// newline records a line break at offset off (the '\n').
func (lx *lexer) newline(off int) {
	lx.line++
	lx.lineStart = off + 1
}

// skip skips white space and comments.
func (lx *lexer) skip() *Error {
	src := lx.src
	for lx.off < len(src) {
		c := src[lx.off]
		switch {
		case c == '\n':
			lx.newline(lx.off)
			lx.off++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			lx.off++
		case c == '/' && lx.off+1 < len(src) && src[lx.off+1] == '/':
			for lx.off < len(src) && src[lx.off] != '\n' {
				lx.off++
			}
		case c == '/' && lx.off+1 < len(src) && src[lx.off+1] == '*':
			start := lx.pos(lx.off)
			end := strings.Index(src[lx.off+2:], "*/")
			if end < 0 {
				return lx.errorf(start, "unterminated comment")
			}
			end += lx.off + 2
			body := src[lx.off+2 : end]
			for i := lx.off; i < end; i++ {
				if src[i] == '\n' {
					lx.newline(i)
				}
			}
			if strings.HasPrefix(body, "*") && body != "*" {
				lx.doc = cleanDoc(body[1:])
			}
			lx.off = end + 2
		default:
			return nil
		}
	}
	return nil
}

// cleanDoc strips the comment decoration from the inside of a doc comment:
// leading blanks and stars on each line, one space after them, trailing
// blanks, and leading and trailing empty lines.
func cleanDoc(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimLeft(l, " \t\r\f")
		l = strings.TrimLeft(l, "*")
		l = strings.TrimPrefix(l, " ")
		lines[i] = strings.TrimRight(l, " \t\r\f")
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func (lx *lexer) emit(t token) {
	t.doc = lx.doc
	lx.doc = ""
	*lx.out = t
}

// token scans one token at lx.off.
func (lx *lexer) token() *Error {
	src := lx.src
	start := lx.off
	p := lx.pos(start)
	c := src[start]
	switch {
	case isLetter(c) || c == '^' && start+1 < len(src) && isLetter(src[start+1]):
		escaped := c == '^'
		if escaped {
			lx.off++
		}
		name := lx.word()
		lx.emit(token{kind: tIdent, text: name, pos: p, end: lx.off, escaped: escaped})
	case c == '`':
		return lx.quotedName(p)
	case c == '@':
		lx.off++
		if lx.off >= len(src) || !isLetter(src[lx.off]) {
			return lx.errorf(p, "'@' must be followed by an annotation name")
		}
		name := lx.word()
		lx.emit(token{kind: tAt, text: name, pos: p, end: lx.off})
	case isDigit(c) || c == '-' && start+1 < len(src) && isDigit(src[start+1]):
		return lx.number(p)
	case c == '"' || c == '\'':
		return lx.str(p, c)
	case strings.IndexByte("{}:,.=[]*", c) >= 0:
		lx.off++
		lx.emit(token{kind: tPunct, text: src[start:lx.off], pos: p, end: lx.off})
	default:
		r, _ := utf8.DecodeRuneInString(src[start:])
		if r == utf8.RuneError {
			return lx.errorf(p, "unexpected byte 0x%02x", c)
		}
		return lx.errorf(p, "unexpected character %q", r)
	}
	return nil
}

// word scans an identifier. A hyphen followed by a letter continues it, so
// that "auto-increment" is one word; names are checked by the parser.
func (lx *lexer) word() string {
	src := lx.src
	start := lx.off
	for lx.off < len(src) {
		c := src[lx.off]
		if isLetter(c) || isDigit(c) || c == '-' && lx.off+1 < len(src) && isLetter(src[lx.off+1]) {
			lx.off++
			continue
		}
		break
	}
	return src[start:lx.off]
}

// quotedName scans a name in backquotes, tracebridge's extension of IRL
// for names that are not identifiers: flattened JFR fields
// ("eventThread.javaThreadId"), nested classes ("Outer$Inner"). Any
// character but a backquote or a line break may appear; the name is never
// a keyword, and dots in it do not separate names.
func (lx *lexer) quotedName(p Pos) *Error {
	src := lx.src
	end := strings.IndexAny(src[lx.off+1:], "`\n\r")
	if end < 0 || src[lx.off+1+end] != '`' {
		return lx.errorf(p, "unterminated name in backquotes")
	}
	if end == 0 {
		return lx.errorf(p, "empty name in backquotes")
	}
	name := src[lx.off+1 : lx.off+1+end]
	lx.off += end + 2
	lx.emit(token{kind: tIdent, text: name, pos: p, end: lx.off, escaped: true, quoted: true})
	return nil
}

// number scans an integer or a float:
// -?digits, -?digits.digits*([eE][+-]?digits)?f?, -?digits f.
func (lx *lexer) number(p Pos) *Error {
	src := lx.src
	start := lx.off
	i := start
	if src[i] == '-' {
		i++
	}
	digits := func() {
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	digits()
	kind := tInt
	if i < len(src) && src[i] == '.' {
		kind = tFloat
		i++
		digits()
		if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
			j := i + 1
			if j < len(src) && (src[j] == '+' || src[j] == '-') {
				j++
			}
			if j < len(src) && isDigit(src[j]) {
				i = j
				digits()
			}
		}
	}
	if i < len(src) && src[i] == 'f' {
		kind = tFloat
		i++
	}
	if i < len(src) && (isLetter(src[i]) || isDigit(src[i]) || src[i] == '.') {
		return lx.errorf(p, "invalid number %q", src[start:min(i+1, len(src))])
	}
	lx.off = i
	lx.emit(token{kind: kind, text: src[start:i], pos: p, end: i})
	return nil
}

// str scans a string in single or double quotes with Java escapes. Strings
// may span lines.
func (lx *lexer) str(p Pos, quote byte) *Error {
	src := lx.src
	i := lx.off + 1
	var b *strings.Builder
	segment := i // start of the text not yet copied to b
	for {
		if i >= len(src) {
			return lx.errorf(p, "unterminated string")
		}
		c := src[i]
		switch {
		case c == quote:
			raw := src[lx.off : i+1]
			val := src[segment:i]
			if b != nil {
				b.WriteString(val)
				val = b.String()
			}
			lx.off = i + 1
			lx.emit(token{kind: tString, text: raw, val: val, pos: p, end: lx.off})
			return nil
		case c == '\n':
			lx.newline(i)
			i++
		case c == '\\':
			if b == nil {
				b = &strings.Builder{}
			}
			b.WriteString(src[segment:i])
			if i+1 >= len(src) {
				return lx.errorf(p, "unterminated string")
			}
			esc := src[i+1]
			i += 2
			switch esc {
			case 'b':
				b.WriteByte('\b')
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'f':
				b.WriteByte('\f')
			case 'r':
				b.WriteByte('\r')
			case 'u':
				r, ok := hex4(src[i:])
				if !ok {
					return lx.errorf(lx.pos(i-2), "invalid unicode escape in string")
				}
				b.WriteRune(r)
				i += 4
			case '\n':
				lx.newline(i - 1)
				b.WriteByte('\n')
			default:
				b.WriteByte(esc) // \" \' \\ and, leniently, any other character
			}
			segment = i
		default:
			i++
		}
	}
}

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
