package irl

import (
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Default limits (see Config).
const (
	DefaultMaxFileSize = 4 << 20
	DefaultMaxFiles    = 10000
	DefaultMaxNesting  = 32
)

// Config holds the limits of parsing and loading. The zero value uses the
// defaults.
type Config struct {
	MaxFileSize int64 // bytes per IRL file (DefaultMaxFileSize)
	MaxFiles    int   // files per Load (DefaultMaxFiles)
	MaxNesting  int   // depth of nested array literals {…} (DefaultMaxNesting)
}

func (c Config) maxFileSize() int64 {
	if c.MaxFileSize > 0 {
		return c.MaxFileSize
	}
	return DefaultMaxFileSize
}

func (c Config) maxFiles() int {
	if c.MaxFiles > 0 {
		return c.MaxFiles
	}
	return DefaultMaxFiles
}

func (c Config) maxNesting() int {
	if c.MaxNesting > 0 {
		return c.MaxNesting
	}
	return DefaultMaxNesting
}

// Parse parses one IRL file with the default limits. It checks syntax
// only: names are resolved by Load. Errors are *Error values reading
// "file:line:col: reason".
func Parse(filename string, src []byte) (*File, error) {
	return Config{}.Parse(filename, src)
}

// Parse parses one IRL file (see the package function Parse). The result
// does not share memory with src.
func (c Config) Parse(filename string, src []byte) (*File, error) {
	if int64(len(src)) > c.maxFileSize() {
		return nil, newError(Pos{File: filename, Line: 1, Col: 1}, "file size %d over the limit %d", len(src), c.maxFileSize())
	}
	text := string(src)
	p := &parser{lx: newLexer(filename, text), src: text, maxNesting: c.maxNesting()}
	p.scan()
	f, err := p.file(filename)
	if p.lexErr != nil {
		// The parser stopped at the end-of-file token standing in for
		// what the lexer could not read: the lexer's error is the cause.
		return nil, p.lexErr
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// keywords cannot be used as names unless escaped with ^.
var keywords = map[string]bool{
	"package": true, "import": true, "entity": true, "event": true, "template": true,
	"abstract": true, "extends": true, "const": true, "alias": true, "as": true,
	"grouped": true, "by": true,
	Changeable: true, Transient: true, AutoIncrement: true, Increment: true,
	"boolean": true, "byte": true, "short": true, "int": true, "long": true,
	"float": true, "double": true, "char": true, "string": true, "String": true,
}

// parser is a recursive-descent parser over a lexer that scans one token
// ahead.
type parser struct {
	lx         *lexer
	cur        token
	prevEnd    int // offset just past the previous token
	lexErr     *Error
	src        string
	maxNesting int
}

// scan reads the next token into p.cur. After a lexer error p.cur is an
// end-of-file token and p.lexErr holds the error.
func (p *parser) scan() {
	if p.lexErr != nil {
		return
	}
	if err := p.lx.next(&p.cur); err != nil {
		p.lexErr = err
		p.cur = token{kind: tEOF, pos: err.Pos, end: err.Pos.Offset}
	}
}

func (p *parser) tok() token { return p.cur }

// advance consumes the current token and returns it.
func (p *parser) advance() token {
	t := p.cur
	if t.kind != tEOF {
		p.prevEnd = t.end
		p.scan()
	}
	return t
}

// isKeyword reports whether the current token is the unescaped keyword kw.
func (p *parser) isKeyword(kw string) bool {
	t := &p.cur
	return t.kind == tIdent && !t.escaped && t.text == kw
}

func (p *parser) isPunct(c string) bool {
	t := &p.cur
	return t.kind == tPunct && t.text == c
}

func (p *parser) errorf(t token, format string, args ...any) *Error {
	return newError(t.pos, format, args...)
}

func (p *parser) expectPunct(c, context string) *Error {
	if !p.isPunct(c) {
		return p.errorf(p.tok(), "expected '%s' %s, found %s", c, context, p.tok().describe())
	}
	p.advance()
	return nil
}

// name reads a simple name (an identifier that is not a keyword).
func (p *parser) name(what string) (string, Pos, *Error) {
	t := p.tok()
	if t.kind != tIdent {
		return "", t.pos, p.errorf(t, "missing %s: found %s", what, t.describe())
	}
	if !t.escaped && keywords[t.text] {
		return "", t.pos, p.errorf(t, "missing %s: found keyword %s", what, t.text)
	}
	if !t.quoted && strings.Contains(t.text, "-") {
		return "", t.pos, p.errorf(t, "invalid %s %q", what, t.text)
	}
	p.advance()
	return t.text, t.pos, nil
}

// part reads one part of a dotted name: a name in backquotes may hold
// any character but a dot there, since dots separate the parts.
func (p *parser) part(what string) (string, Pos, *Error) {
	if t := p.tok(); t.kind == tIdent && t.quoted && strings.Contains(t.text, ".") {
		return "", t.pos, p.errorf(t, "invalid %s: `%s` in backquotes holds a '.', which separates the parts of a dotted name", what, t.text)
	}
	return p.name(what)
}

// qualified reads a dotted name. With wildcard set it also accepts a
// trailing ".*" and reports it.
func (p *parser) qualified(what string, wildcard bool) (name string, pos Pos, star bool, err *Error) {
	first, pos, err := p.part(what)
	if err != nil {
		return "", pos, false, err
	}
	var b strings.Builder
	b.WriteString(first)
	for p.isPunct(".") {
		p.advance()
		if wildcard && p.isPunct("*") {
			p.advance()
			return b.String(), pos, true, nil
		}
		part, _, err := p.part(what)
		if err != nil {
			return "", pos, false, err
		}
		b.WriteByte('.')
		b.WriteString(part)
	}
	return b.String(), pos, false, nil
}

func (p *parser) file(filename string) (*File, *Error) {
	f := &File{Name: filename}
	if !p.isKeyword("package") {
		return nil, p.errorf(p.tok(), "missing package declaration: found %s", p.tok().describe())
	}
	p.advance()
	pkg, pos, _, err := p.qualified("package name", false)
	if err != nil {
		return nil, err
	}
	f.Package, f.Pos = pkg, pos
	for {
		switch {
		case p.tok().kind == tEOF:
			return f, nil
		case p.isKeyword("package"):
			return nil, p.errorf(p.tok(), "second package declaration (the file's package is %s)", f.Package)
		case p.isKeyword("import"):
			p.advance()
			path, pos, star, err := p.qualified("import name", true)
			if err != nil {
				return nil, err
			}
			f.Imports = append(f.Imports, Import{Path: path, Wildcard: star, Pos: pos})
		default:
			d, err := p.decl(f.Package)
			if err != nil {
				return nil, err
			}
			f.Decls = append(f.Decls, d)
		}
	}
}

// decl parses [annotations] [abstract] (entity|event|template) Name
// [extends Parent] [: T1, T2] [{ body }].
func (p *parser) decl(pkg string) (*Decl, *Error) {
	d := &Decl{Package: pkg}
	// The doc comment of a declaration is the last one before any token
	// of its preamble (annotations, abstract, keyword).
	note := func() {
		if doc := p.tok().doc; doc != "" {
			d.Doc = doc
		}
	}
	for p.tok().kind == tAt {
		note()
		at := p.advance()
		v := p.tok()
		if v.kind != tString {
			return nil, p.errorf(v, "annotation @%s needs a string value, found %s", at.text, v.describe())
		}
		note()
		p.advance()
		d.Annotations = append(d.Annotations, Annotation{Name: at.text, Value: v.val, Pos: at.pos})
	}
	if p.isKeyword("abstract") {
		note()
		p.advance()
		d.Abstract = true
	}
	kw := p.tok()
	switch {
	case p.isKeyword("entity"):
		d.Kind = Entity
	case p.isKeyword("event"):
		d.Kind = Event
	case p.isKeyword("template"):
		d.Kind = Template
		if d.Abstract {
			return nil, p.errorf(kw, "a template cannot be abstract")
		}
	default:
		return nil, p.errorf(kw, "expected entity, event or template, found %s", kw.describe())
	}
	note()
	p.advance()
	var err *Error
	if d.Name, d.Pos, err = p.name(d.Kind.String() + " name"); err != nil {
		return nil, err
	}
	if p.isKeyword("extends") {
		if d.Kind == Template {
			return nil, p.errorf(p.tok(), "template %s: a template cannot extend; list parent templates after ':'", d.Name)
		}
		p.advance()
		name, pos, _, err := p.qualified("parent name", false)
		if err != nil {
			return nil, err
		}
		d.Parent = &Ref{Name: name, Pos: pos}
	}
	if p.isPunct(":") {
		p.advance()
		for {
			name, pos, _, err := p.qualified("template name", false)
			if err != nil {
				return nil, err
			}
			d.Templates = append(d.Templates, Ref{Name: name, Pos: pos})
			if !p.isPunct(",") {
				break
			}
			p.advance()
		}
	}
	if p.isPunct("{") {
		open := p.advance()
		if err := p.body(d, open); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (p *parser) body(d *Decl, open token) *Error {
	for {
		t := p.tok()
		switch {
		case t.kind == tEOF:
			return p.errorf(open, "%s %s: missing '}' for this '{'", d.Kind, d.Name)
		case p.isPunct("}"):
			p.advance()
			return nil
		case p.isKeyword("const"):
			c, err := p.constant()
			if err != nil {
				return err
			}
			d.Constants = append(d.Constants, c)
		default:
			alias, field, err := p.property()
			if err != nil {
				return err
			}
			if alias != nil {
				d.Aliases = append(d.Aliases, alias)
			} else {
				d.Fields = append(d.Fields, field)
			}
		}
	}
}

// constant parses "const type NAME = literal".
func (p *parser) constant() (*Const, *Error) {
	doc := p.tok().doc
	p.advance()
	typ, err := p.typeRef()
	if err != nil {
		return nil, err
	}
	c := &Const{Type: typ, Doc: doc}
	if c.Name, c.Pos, err = p.name("constant name"); err != nil {
		return nil, err
	}
	if err := p.expectPunct("=", "after constant "+c.Name); err != nil {
		return nil, err
	}
	if c.Value, err = p.literal(0); err != nil {
		return nil, err
	}
	return c, nil
}

// property parses a field or an alias:
//
//	modifier* (grouped by Decl.field [type] | type) name [: semantics] [= literal] [: semantics]
//	modifier* alias field as name
func (p *parser) property() (*Alias, *FieldDecl, *Error) {
	doc := p.tok().doc
	f := &FieldDecl{Doc: doc}
	for {
		t := p.tok()
		if t.kind != tIdent || t.escaped || !modifiers[t.text] {
			break
		}
		f.Modifiers = append(f.Modifiers, t.text)
		p.advance()
	}
	switch {
	case p.isKeyword("alias"):
		p.advance()
		a := &Alias{}
		var err *Error
		if a.Field, _, err = p.name("aliased field name"); err != nil {
			return nil, nil, err
		}
		if !p.isKeyword("as") {
			return nil, nil, p.errorf(p.tok(), "expected 'as' after alias %s, found %s", a.Field, p.tok().describe())
		}
		p.advance()
		if a.Name, a.Pos, err = p.name("alias name"); err != nil {
			return nil, nil, err
		}
		return a, nil, nil
	case p.isKeyword("grouped"):
		p.advance()
		if !p.isKeyword("by") {
			return nil, nil, p.errorf(p.tok(), "expected 'by' after 'grouped', found %s", p.tok().describe())
		}
		p.advance()
		ref, pos, _, err := p.qualified("referenced field", false)
		if err != nil {
			return nil, nil, err
		}
		dot := strings.LastIndexByte(ref, '.')
		if dot < 0 {
			return nil, nil, newError(pos, "grouped by %s: expected Type.field", ref)
		}
		f.GroupedBy = &FieldRef{Decl: Ref{Name: ref[:dot], Pos: pos}, Field: ref[dot+1:], Pos: pos}
		// An explicit type may follow (older IRL): "grouped by T.f long name".
		if t := p.tok(); t.kind == tIdent && !t.escaped {
			if _, ok := record.ParseKind(t.text); ok && keywords[t.text] {
				if f.Type, err = p.typeRef(); err != nil {
					return nil, nil, err
				}
			}
		}
	default:
		var err *Error
		if f.Type, err = p.typeRef(); err != nil {
			return nil, nil, err
		}
	}
	var err *Error
	if f.Name, f.Pos, err = p.name("field name"); err != nil {
		return nil, nil, err
	}
	if err := p.semantics(f); err != nil {
		return nil, nil, err
	}
	if p.isPunct("=") {
		p.advance()
		if f.Default, err = p.literal(0); err != nil {
			return nil, nil, err
		}
		if err := p.semantics(f); err != nil {
			return nil, nil, err
		}
	}
	return nil, f, nil
}

// semantics parses an optional ": name" semantic annotation.
func (p *parser) semantics(f *FieldDecl) *Error {
	if !p.isPunct(":") {
		return nil
	}
	colon := p.advance()
	if f.Semantics != "" {
		return p.errorf(colon, "field %s: second semantic annotation", f.Name)
	}
	s, _, err := p.name("semantic annotation")
	if err != nil {
		return err
	}
	f.Semantics = s
	return nil
}

// typeRef parses a base type with optional array dimensions.
func (p *parser) typeRef() (TypeRef, *Error) {
	t := p.tok()
	if t.kind != tIdent {
		return TypeRef{}, p.errorf(t, "expected a type, found %s", t.describe())
	}
	k, ok := record.ParseKind(t.text)
	if !ok || !keywords[t.text] || t.escaped { // only IRL's spellings, not Java's boxed names
		return TypeRef{}, p.errorf(t, "unknown type %q", t.text)
	}
	p.advance()
	tr := TypeRef{Name: t.text, Kind: k, Pos: t.pos}
	for p.isPunct("[") {
		p.advance()
		size := 0
		if n := p.tok(); n.kind == tInt {
			v, err := strconv.Atoi(n.text)
			if err != nil || v <= 0 {
				return TypeRef{}, p.errorf(n, "invalid array size %s", n.text)
			}
			size = v
			p.advance()
		}
		if err := p.expectPunct("]", "to close the array size"); err != nil {
			return TypeRef{}, err
		}
		tr.Dims = append(tr.Dims, size)
	}
	return tr, nil
}

// literal parses a default or constant value.
func (p *parser) literal(depth int) (*Literal, *Error) {
	t := p.tok()
	start := t.pos.Offset
	l := &Literal{Text: t.text, Pos: t.pos}
	switch t.kind {
	case tString:
		l.Kind, l.Str = LitString, t.val
	case tInt:
		v, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, p.errorf(t, "integer %s out of range", t.text)
		}
		l.Kind, l.Int = LitInt, v
	case tFloat:
		v, err := strconv.ParseFloat(strings.TrimSuffix(t.text, "f"), 64)
		if err != nil {
			return nil, p.errorf(t, "float %s out of range", t.text)
		}
		l.Kind, l.Float = LitFloat, v
	case tIdent:
		if !t.escaped && (t.text == "true" || t.text == "false") {
			l.Kind, l.Bool = LitBool, t.text == "true"
			break
		}
		name, _, _, err := p.qualified("value", false)
		if err != nil {
			return nil, err
		}
		l.Kind, l.Str, l.Text = LitIdent, name, p.src[start:p.prevEnd]
		return l, nil
	case tPunct:
		if t.text != "{" {
			return nil, p.errorf(t, "expected a value, found %s", t.describe())
		}
		if depth >= p.maxNesting {
			return nil, p.errorf(t, "array literal nested deeper than the limit %d", p.maxNesting)
		}
		p.advance()
		l.Kind = LitArray
		for {
			e, err := p.literal(depth + 1)
			if err != nil {
				return nil, err
			}
			l.Elems = append(l.Elems, *e)
			if !p.isPunct(",") {
				break
			}
			p.advance()
		}
		if err := p.expectPunct("}", "to close the array value"); err != nil {
			return nil, err
		}
		l.Text = p.src[start:p.prevEnd]
		return l, nil
	default:
		return nil, p.errorf(t, "expected a value, found %s", t.describe())
	}
	p.advance()
	return l, nil
}
