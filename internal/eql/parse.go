package eql

import (
	"math"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on expressions; beyond them Parse returns a *SyntaxError.
const (
	// MaxLen is the longest expression, in bytes.
	MaxLen = 4096
	// MaxDepth bounds the nesting of parentheses and prefix operators
	// (not, !, -, ~).
	MaxDepth = 64
	// MaxRegexInsts bounds a regular expression's compiled program:
	// matching costs up to its size times the length of the value.
	MaxRegexInsts = 1000
)

// Expr is a parsed expression. It is immutable and safe for concurrent
// use.
type Expr struct {
	root *node
	uses uses
}

// uses says which costly properties an expression looks at.
type uses uint8

const (
	usesSubtree   uses = 1 << iota // calls, errors
	usesTraceSpan                  // pct
)

// Parse parses an EQL expression (docs/QUERY.md). Its errors are
// *SyntaxError, naming the position and the reason.
func Parse(expr string) (*Expr, error) {
	if len(expr) > MaxLen {
		return nil, errAt(expr, MaxLen, "expression longer than %d bytes", MaxLen)
	}
	if !utf8.ValidString(expr) {
		off := 0
		for off < len(expr) {
			r, n := utf8.DecodeRuneInString(expr[off:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			off += n
		}
		return nil, errAt(expr, off, "invalid UTF-8")
	}
	p := &parser{lx: lexer{src: expr}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, errAt(expr, p.tok.pos, "empty expression")
	}
	root, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		if p.tok.kind == tRParen {
			return nil, p.unexpected()
		}
		return nil, errAt(expr, p.tok.pos, "unexpected %s: want an operator", p.describe())
	}
	e := &Expr{root: root}
	e.uses = usesOf(root)
	return e, nil
}

// String returns the expression in normalised form: canonical operator
// spellings (= != and or not), lower-case keywords, single-quoted
// strings, decimal integers, durations in their largest exact unit, no
// comments, parentheses only where needed. Parse of it gives an
// equivalent expression (when it stays within MaxLen: the spaces around
// operators lengthen an expression written tightly).
func (e *Expr) String() string {
	if e == nil || e.root == nil {
		return ""
	}
	var sb strings.Builder
	e.root.render(&sb)
	return sb.String()
}

// sexpr returns the tree fully parenthesised (tests).
func (e *Expr) sexpr() string {
	var sb strings.Builder
	e.root.sexpr(&sb)
	return sb.String()
}

func usesOf(n *node) uses {
	if n == nil {
		return 0
	}
	u := usesOf(n.l) | usesOf(n.r)
	if n.op == opIdent {
		switch n.b {
		case bCalls, bErrors:
			u |= usesSubtree
		case bPct:
			u |= usesTraceSpan
		}
	}
	return u
}

// parser is a recursive-descent parser, one function per precedence
// level.
type parser struct {
	lx    lexer
	tok   token
	depth int
}

func (p *parser) advance() *SyntaxError {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// describe names the current token for a message.
func (p *parser) describe() string {
	if p.tok.kind == tEOF {
		return "end of expression"
	}
	s := p.lx.src[p.tok.pos:p.tok.end]
	if len(s) > 32 {
		cut := 32
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

func (p *parser) unexpected() *SyntaxError {
	return errAt(p.lx.src, p.tok.pos, "unexpected %s", p.describe())
}

func (p *parser) enter(pos int) *SyntaxError {
	p.depth++
	if p.depth > MaxDepth {
		return errAt(p.lx.src, pos, "nested deeper than %d levels", MaxDepth)
	}
	return nil
}

func bin(o op, pos int, l, r *node) *node { return &node{op: o, pos: pos, l: l, r: r} }

// or = and { ("or" | "||") and }
func (p *parser) parseOr() (*node, *SyntaxError) {
	l, err := p.parseAnd()
	for err == nil && p.tok.kind == tOr {
		pos := p.tok.pos
		if err = p.advance(); err != nil {
			break
		}
		var r *node
		if r, err = p.parseAnd(); err == nil {
			l = bin(opOr, pos, l, r)
		}
	}
	return l, err
}

// and = not { ("and" | "&&") not }
func (p *parser) parseAnd() (*node, *SyntaxError) {
	l, err := p.parseNot()
	for err == nil && p.tok.kind == tAnd {
		pos := p.tok.pos
		if err = p.advance(); err != nil {
			break
		}
		var r *node
		if r, err = p.parseNot(); err == nil {
			l = bin(opAnd, pos, l, r)
		}
	}
	return l, err
}

// not = ("not" | "!") not | cmp
func (p *parser) parseNot() (*node, *SyntaxError) {
	if p.tok.kind != tNot {
		return p.parseCmp()
	}
	pos := p.tok.pos
	if err := p.enter(pos); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	p.depth--
	return &node{op: opNot, pos: pos, l: x}, nil
}

func isCmp(o op) bool {
	switch o {
	case opEq, opNe, opRe, opLt, opLe, opGt, opGe:
		return true
	}
	return false
}

// cmp = bitor { cmpop bitor }
func (p *parser) parseCmp() (*node, *SyntaxError) {
	l, err := p.parseBitOr()
	for err == nil && p.tok.kind == tOp && isCmp(p.tok.op) {
		o, pos := p.tok.op, p.tok.pos
		if err = p.advance(); err != nil {
			break
		}
		rpos := p.tok.pos
		var r *node
		if r, err = p.parseBitOr(); err == nil {
			l, err = p.comparison(o, pos, rpos, l, r)
		}
	}
	return l, err
}

// comparison builds l o r (r starts at rpos): = null and != null test
// for absence and presence; ~= compiles its pattern.
func (p *parser) comparison(o op, pos, rpos int, l, r *node) (*node, *SyntaxError) {
	switch o {
	case opEq, opNe:
		x := l
		switch {
		case r.isNullLit():
		case l.isNullLit():
			x = r
		default:
			return bin(o, pos, l, r), nil
		}
		if o == opEq {
			return &node{op: opIsNull, pos: pos, l: x}, nil
		}
		return &node{op: opNotNull, pos: pos, l: x}, nil
	case opRe:
		if r.op != opLit || r.val.k != kStr {
			return nil, errAt(p.lx.src, rpos, `"~=" takes a string literal (the regular expression) on its right`)
		}
		re, err := compileRegex(r.val.s)
		if err != "" {
			return nil, errAt(p.lx.src, rpos, "%s", err)
		}
		n := bin(o, pos, l, r)
		n.re = re
		return n, nil
	}
	return bin(o, pos, l, r), nil
}

// compileRegex compiles an RE2 pattern within MaxRegexInsts, or says why
// not.
func compileRegex(pat string) (*regexp.Regexp, string) {
	sre, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return nil, "bad regular expression: " + strings.TrimPrefix(err.Error(), "error parsing regexp: ")
	}
	prog, err := syntax.Compile(sre.Simplify())
	if err != nil {
		return nil, "bad regular expression: " + err.Error()
	}
	if n := len(prog.Inst); n > MaxRegexInsts {
		return nil, "regular expression too large (" + strconv.Itoa(n) + " instructions, at most " + strconv.Itoa(MaxRegexInsts) + ")"
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, "bad regular expression: " + strings.TrimPrefix(err.Error(), "error parsing regexp: ")
	}
	return re, ""
}

// bitor = bitand { ("|" | "^") bitand }
func (p *parser) parseBitOr() (*node, *SyntaxError) {
	return p.binaryLevel(p.parseBitAnd, opBitOr, opBitXor, opBitOr)
}

// bitand = add { "&" add }
func (p *parser) parseBitAnd() (*node, *SyntaxError) {
	return p.binaryLevel(p.parseAdd, opBitAnd, opBitAnd, opBitAnd)
}

// add = mul { ("+" | "-") mul }
func (p *parser) parseAdd() (*node, *SyntaxError) {
	return p.binaryLevel(p.parseMul, opAdd, opSub, opAdd)
}

// mul = unary { ("*" | "/" | "%") unary }
func (p *parser) parseMul() (*node, *SyntaxError) {
	return p.binaryLevel(p.parseUnary, opMul, opDiv, opRem)
}

// binaryLevel parses a left-associative level of the operators a, b, c.
func (p *parser) binaryLevel(operand func() (*node, *SyntaxError), a, b, c op) (*node, *SyntaxError) {
	l, err := operand()
	for err == nil && p.tok.kind == tOp && (p.tok.op == a || p.tok.op == b || p.tok.op == c) {
		o, pos := p.tok.op, p.tok.pos
		if err = p.advance(); err != nil {
			break
		}
		var r *node
		if r, err = operand(); err == nil {
			l = bin(o, pos, l, r)
		}
	}
	return l, err
}

// unary = ("-" | "~") unary | primary; a - directly before a number is
// part of it (zico's literals are signed).
func (p *parser) parseUnary() (*node, *SyntaxError) {
	if p.tok.kind != tOp || p.tok.op != opSub && p.tok.op != opBitNot {
		return p.parsePrimary()
	}
	o, pos := p.tok.op, p.tok.pos
	if err := p.enter(pos); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if o == opSub {
		switch p.tok.kind {
		case tInt:
			if p.tok.u > 1<<63 {
				return nil, errAt(p.lx.src, pos, "integer -%d out of range", p.tok.u)
			}
			n := &node{op: opLit, pos: pos, val: value{k: kInt, i: int64(-p.tok.u)}}
			p.depth--
			return n, p.advance()
		case tFloat, tDur:
			n := p.literal()
			n.pos = pos
			if n.val.k == kFloat {
				n.val.f = -n.val.f
			} else {
				n.val.i = -n.val.i
			}
			p.depth--
			return n, p.advance()
		}
	}
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	p.depth--
	if o == opSub {
		o = opNeg
	}
	return &node{op: o, pos: pos, l: x}, nil
}

// literal returns the node of the current literal token.
func (p *parser) literal() *node {
	t := p.tok
	n := &node{op: opLit, pos: t.pos}
	switch t.kind {
	case tInt:
		n.val = value{k: kInt, i: int64(t.u)}
	case tFloat:
		n.val = value{k: kFloat, f: t.f}
	case tDur:
		n.val, n.dur = value{k: kInt, i: t.i}, true
	case tString:
		n.val = value{k: kStr, s: t.s}
	case tTrue, tFalse:
		n.val = value{k: kBool, b: t.kind == tTrue}
	}
	return n
}

// primary = literal | name | "(" or ")"
func (p *parser) parsePrimary() (*node, *SyntaxError) {
	t := p.tok
	switch t.kind {
	case tInt:
		if t.u > math.MaxInt64 {
			return nil, errAt(p.lx.src, t.pos, "integer %d out of range", t.u)
		}
		fallthrough
	case tFloat, tDur, tString, tNull, tTrue, tFalse:
		n := p.literal()
		return n, p.advance()
	case tIdent:
		n := &node{op: opIdent, pos: t.pos}
		if b, ok := builtins[t.s]; ok && !t.quoted {
			n.b = b
		} else {
			n.name = t.s
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tLParen {
			return nil, errAt(p.lx.src, p.tok.pos, `unexpected "(": EQL has no functions`)
		}
		return n, nil
	case tLParen:
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		switch p.tok.kind {
		case tRParen:
		case tEOF:
			return nil, errAt(p.lx.src, p.tok.pos, `missing ")" to close the "(" at %s`, where(p.lx.src, t.pos))
		default:
			return nil, errAt(p.lx.src, p.tok.pos, `unexpected %s: want an operator or ")"`, p.describe())
		}
		p.depth--
		return x, p.advance()
	}
	return nil, p.unexpected()
}
