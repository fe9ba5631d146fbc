package eql

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SyntaxError is the error of Parse: where in the expression (byte
// offset, 1-based line and column, columns counting characters) and why.
type SyntaxError struct {
	Offset       int
	Line, Column int
	Msg          string

	multiline bool // the expression has several lines: name the line too
}

// Error reads like `eql: column 12: unexpected ")"`, or with the line for
// an expression of several lines.
func (e *SyntaxError) Error() string {
	if e.multiline {
		return fmt.Sprintf("eql: line %d, column %d: %s", e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("eql: column %d: %s", e.Column, e.Msg)
}

// errAt returns a SyntaxError at byte offset off of src.
func errAt(src string, off int, format string, args ...any) *SyntaxError {
	if off > len(src) {
		off = len(src)
	}
	line, start := 1, 0
	for i := 0; i < off; i++ {
		if src[i] == '\n' {
			line++
			start = i + 1
		}
	}
	return &SyntaxError{
		Offset:    off,
		Line:      line,
		Column:    utf8.RuneCountInString(src[start:off]) + 1,
		Msg:       fmt.Sprintf(format, args...),
		multiline: strings.IndexByte(src, '\n') >= 0,
	}
}

// where names offset off of src for a message: "column 3", or "line 2,
// column 3" in an expression of several lines.
func where(src string, off int) string {
	e := errAt(src, off, "")
	if e.multiline {
		return fmt.Sprintf("line %d, column %d", e.Line, e.Column)
	}
	return fmt.Sprintf("column %d", e.Column)
}

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // a name; quoted: written in backquotes
	tInt            // u: the magnitude (the sign is an operator)
	tFloat          // f
	tDur            // i: nanoseconds
	tString         // s: the value, escapes resolved
	tNull
	tTrue
	tFalse
	tAnd
	tOr
	tNot
	tOp // op: an operator symbol
	tLParen
	tRParen
)

type token struct {
	kind     tokKind
	pos, end int // byte offsets in the source
	op       op
	quoted   bool
	u        uint64
	i        int64
	f        float64
	s        string
}

// lexer cuts the source into tokens on demand.
type lexer struct {
	src string
	pos int
}

// units are the duration suffixes and their length in nanoseconds.
var units = map[string]int64{
	"ns": 1,
	"us": 1e3,
	"ms": 1e6,
	"s":  1e9,
	"m":  60e9,
	"h":  3600e9,
}

// keywords are case-insensitive.
var keywords = map[string]tokKind{
	"and":   tAnd,
	"or":    tOr,
	"not":   tNot,
	"null":  tNull,
	"true":  tTrue,
	"false": tFalse,
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isWord(c byte) bool   { return isLetter(c) || isDigit(c) }

func (l *lexer) peekByte(off int) byte {
	if l.pos+off < len(l.src) {
		return l.src[l.pos+off]
	}
	return 0
}

// skipSpace skips white space and comments (-- and // to the end of the
// line).
func (l *lexer) skipSpace() {
	for l.pos < len(l.src) {
		switch c := l.src[l.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case (c == '-' || c == '/') && l.peekByte(1) == c:
			if i := strings.IndexByte(l.src[l.pos:], '\n'); i >= 0 {
				l.pos += i + 1
			} else {
				l.pos = len(l.src)
			}
		default:
			return
		}
	}
}

// operators, longest first where one is a prefix of another.
var operators = []struct {
	sym string
	op  op
}{
	{"==", opEq}, {"!=", opNe}, {"<>", opNe}, {"<=", opLe}, {">=", opGe},
	{"~=", opRe}, {"&&", opAnd}, {"||", opOr},
	{"=", opEq}, {"<", opLt}, {">", opGt}, {"+", opAdd}, {"-", opSub},
	{"*", opMul}, {"/", opDiv}, {"%", opRem}, {"&", opBitAnd}, {"|", opBitOr},
	{"^", opBitXor}, {"~", opBitNot}, {"!", opNot},
}

func (l *lexer) next() (token, *SyntaxError) {
	l.skipSpace()
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tEOF, pos: start, end: start}, nil
	}
	c := l.src[l.pos]
	switch {
	case isLetter(c):
		return l.ident(), nil
	case isDigit(c):
		return l.number()
	case c == '\'' || c == '"':
		return l.str()
	case c == '`':
		end := strings.IndexAny(l.src[l.pos+1:], "`\n")
		if end < 0 || l.src[l.pos+1+end] != '`' {
			return token{}, errAt(l.src, start, "unterminated quoted name")
		}
		name := l.src[l.pos+1 : l.pos+1+end]
		if name == "" {
			return token{}, errAt(l.src, start, "empty quoted name")
		}
		l.pos += end + 2
		return token{kind: tIdent, pos: start, end: l.pos, quoted: true, s: name}, nil
	case c == '(':
		l.pos++
		return token{kind: tLParen, pos: start, end: l.pos}, nil
	case c == ')':
		l.pos++
		return token{kind: tRParen, pos: start, end: l.pos}, nil
	}
	if strings.HasPrefix(l.src[l.pos:], "=~") {
		return token{}, errAt(l.src, start, `"=~" is not an operator: write "~=" for a regular-expression match (or "= ~" for a bitwise complement)`)
	}
	for _, o := range operators {
		if strings.HasPrefix(l.src[l.pos:], o.sym) {
			l.pos += len(o.sym)
			t := token{kind: tOp, pos: start, end: l.pos, op: o.op}
			switch o.op {
			case opAnd:
				t.kind = tAnd
			case opOr:
				t.kind = tOr
			case opNot:
				t.kind = tNot
			}
			return t, nil
		}
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
	return token{}, errAt(l.src, start, "unexpected character %q", r)
}

// ident reads a name: a letter or _, then letters, digits, _ and dots
// between them (http.status_code). Keywords are names too.
func (l *lexer) ident() token {
	start := l.pos
	l.pos++
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if isWord(c) || c == '.' && isWord(l.peekByte(1)) {
			l.pos++
			continue
		}
		break
	}
	name := l.src[start:l.pos]
	if len(name) <= 5 {
		if k, ok := keywords[strings.ToLower(name)]; ok {
			return token{kind: k, pos: start, end: l.pos, s: name}
		}
	}
	return token{kind: tIdent, pos: start, end: l.pos, s: name}
}

// isName reports whether s can be written as a bare name (not a keyword).
func isName(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if isWord(c) || c == '.' && i+1 < len(s) && isWord(s[i+1]) {
			continue
		}
		return false
	}
	_, kw := keywords[strings.ToLower(s)]
	return !kw
}

// number reads an integer (decimal, or hex with 0x; an L suffix as in
// Java is allowed), a decimal number (1.5, 2e3) or a duration (500ms,
// 1.5s) in nanoseconds.
func (l *lexer) number() (token, *SyntaxError) {
	start := l.pos
	src := l.src
	word := func() string { // the rest of the word, for messages
		e := l.pos
		for e < len(src) && (isWord(src[e]) || src[e] == '.') {
			e++
		}
		return src[start:e]
	}
	if src[l.pos] == '0' && (l.peekByte(1) == 'x' || l.peekByte(1) == 'X') {
		l.pos += 2
		ds := l.pos
		for l.pos < len(src) && strings.IndexByte("0123456789abcdefABCDEF", src[l.pos]) >= 0 {
			l.pos++
		}
		digits := src[ds:l.pos]
		if l.pos < len(src) && (src[l.pos] == 'L' || src[l.pos] == 'l') {
			l.pos++
		}
		if digits == "" || l.pos < len(src) && (isWord(src[l.pos]) || src[l.pos] == '.') {
			return token{}, errAt(src, start, "malformed number %q", word())
		}
		u, err := strconv.ParseUint(digits, 16, 64)
		if err != nil {
			return token{}, errAt(src, start, "integer %s out of range", src[start:l.pos])
		}
		return token{kind: tInt, pos: start, end: l.pos, u: u}, nil
	}
	for l.pos < len(src) && isDigit(src[l.pos]) {
		l.pos++
	}
	intEnd := l.pos
	frac := ""
	isFloat := false
	if l.pos < len(src) && src[l.pos] == '.' {
		if !isDigit(l.peekByte(1)) {
			return token{}, errAt(src, start, "malformed number %q", word())
		}
		l.pos++
		fs := l.pos
		for l.pos < len(src) && isDigit(src[l.pos]) {
			l.pos++
		}
		frac = src[fs:l.pos]
		isFloat = true
	}
	hasExp := false
	if c := l.peekByte(0); c == 'e' || c == 'E' {
		d := 1
		if s := l.peekByte(1); s == '+' || s == '-' {
			d = 2
		}
		if isDigit(l.peekByte(d)) {
			l.pos += d
			for l.pos < len(src) && isDigit(src[l.pos]) {
				l.pos++
			}
			hasExp, isFloat = true, true
		}
	}
	numEnd := l.pos
	ss := l.pos
	for l.pos < len(src) && isWord(src[l.pos]) {
		l.pos++
	}
	suffix := src[ss:l.pos]
	if l.pos < len(src) && src[l.pos] == '.' {
		return token{}, errAt(src, start, "malformed number %q", word())
	}
	switch {
	case suffix == "":
	case suffix == "L" || suffix == "l":
		if isFloat {
			return token{}, errAt(src, start, "malformed number %q", word())
		}
	default:
		unit, ok := units[suffix]
		if !ok {
			return token{}, errAt(src, start, "malformed number %q (durations end in ns, us, ms, s, m or h)", word())
		}
		if hasExp {
			return token{}, errAt(src, start, "a duration has no exponent: %q", word())
		}
		// Exact: (int.frac × unit) truncated to whole nanoseconds.
		var v, scale big.Int
		v.SetString(src[start:intEnd]+frac, 10)
		v.Mul(&v, big.NewInt(unit))
		scale.Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
		v.Quo(&v, &scale)
		if !v.IsInt64() {
			return token{}, errAt(src, start, "duration %s out of range", src[start:l.pos])
		}
		return token{kind: tDur, pos: start, end: l.pos, i: v.Int64()}, nil
	}
	if isFloat {
		f, err := strconv.ParseFloat(src[start:numEnd], 64)
		if err != nil || math.IsInf(f, 0) {
			return token{}, errAt(src, start, "number %s out of range", src[start:numEnd])
		}
		return token{kind: tFloat, pos: start, end: l.pos, f: f}, nil
	}
	u, err := strconv.ParseUint(src[start:intEnd], 10, 64)
	if err != nil {
		return token{}, errAt(src, start, "integer %s out of range", src[start:intEnd])
	}
	return token{kind: tInt, pos: start, end: l.pos, u: u}, nil
}

// escapes are zico's: \t \b \n \r \f \\ \" \'. A backslash before
// any other character is kept with it, so regular expressions read as
// written ('\d+\.\d+').
var escapes = map[byte]byte{'t': '\t', 'b': '\b', 'n': '\n', 'r': '\r', 'f': '\f', '\\': '\\', '"': '"', '\'': '\''}

// str reads a string in single or double quotes, on one line.
func (l *lexer) str() (token, *SyntaxError) {
	start := l.pos
	q := l.src[l.pos]
	l.pos++
	var sb strings.Builder
	from := l.pos // the start of the run not yet copied
	for {
		if l.pos >= len(l.src) || l.src[l.pos] == '\n' || l.src[l.pos] == '\r' {
			return token{}, errAt(l.src, start, "unterminated string")
		}
		c := l.src[l.pos]
		switch c {
		case q:
			var s string
			if sb.Len() == 0 {
				s = l.src[from:l.pos]
			} else {
				sb.WriteString(l.src[from:l.pos])
				s = sb.String()
			}
			l.pos++
			return token{kind: tString, pos: start, end: l.pos, s: s}, nil
		case '\\':
			sb.WriteString(l.src[from:l.pos])
			if l.pos+1 >= len(l.src) {
				return token{}, errAt(l.src, start, "unterminated string")
			}
			e, ok := escapes[l.src[l.pos+1]]
			if !ok {
				// Kept: from marks the backslash, the next pass copies it.
				from = l.pos
				l.pos++
				continue
			}
			sb.WriteByte(e)
			l.pos += 2
			from = l.pos
		default:
			l.pos++
		}
	}
}
