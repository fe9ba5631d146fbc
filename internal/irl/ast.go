package irl

import (
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Pos is a position in an IRL file. Line and Col are 1-based; Col counts
// bytes. Offset is the 0-based byte offset.
type Pos struct {
	File   string
	Offset int
	Line   int
	Col    int
}

// String renders the position as file:line:col (line:col without a file).
func (p Pos) String() string {
	s := strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Col)
	if p.File != "" {
		s = p.File + ":" + s
	}
	return s
}

// File is one parsed IRL file.
type File struct {
	Name    string // the file name given to Parse
	Package string
	Pos     Pos // of the package name
	Imports []Import
	Decls   []*Decl
}

// Import is an import statement: a fully qualified type name, or a package
// followed by ".*" when Wildcard is set (Path then holds the package).
type Import struct {
	Path     string
	Wildcard bool
	Pos      Pos
}

// DeclKind says which keyword introduced a declaration.
type DeclKind uint8

// The declaration kinds. An event is an entity written with the newer
// keyword; both become record types.
const (
	Entity DeclKind = iota + 1
	Event
	Template
)

// String returns the IRL keyword.
func (k DeclKind) String() string {
	switch k {
	case Entity:
		return "entity"
	case Event:
		return "event"
	case Template:
		return "template"
	}
	return "decl(" + strconv.Itoa(int(k)) + ")"
}

// Decl is an entity, event or template declaration as written.
type Decl struct {
	Kind     DeclKind
	Abstract bool
	Name     string
	Package  string // the package of the file that declares it
	Pos      Pos    // of the name

	Parent    *Ref  // "extends Parent" (entities and events only)
	Templates []Ref // ": T1, T2"

	Fields    []*FieldDecl // own fields in source order, transient ones included
	Constants []*Const
	Aliases   []*Alias

	Annotations []Annotation // @author, @since, … in source order
	Doc         string       // text of the /** … */ comment before the declaration
}

// FullName returns the fully qualified name, package.Name.
func (d *Decl) FullName() string {
	if d.Package == "" {
		return d.Name
	}
	return d.Package + "." + d.Name
}

// IsRecord reports whether the declaration becomes a record type: a
// non-abstract entity or event.
func (d *Decl) IsRecord() bool { return d.Kind != Template && !d.Abstract }

// Annotation returns the value of the first annotation with the given name
// (without "@") and whether there is one.
func (d *Decl) Annotation(name string) (string, bool) {
	for _, a := range d.Annotations {
		if a.Name == name {
			return a.Value, true
		}
	}
	return "", false
}

// Ref is a reference to a type by name, as written (simple or qualified).
type Ref struct {
	Name string
	Pos  Pos
}

// Annotation is "@name 'value'".
type Annotation struct {
	Name  string // without "@"
	Value string // the decoded string
	Pos   Pos
}

// The field modifiers IRL knows. Only transient changes the record layout:
// a transient field is not serialized.
const (
	Changeable    = "changeable"
	Transient     = "transient"
	AutoIncrement = "auto-increment"
	Increment     = "increment"
)

var modifiers = map[string]bool{Changeable: true, Transient: true, AutoIncrement: true, Increment: true}

// FieldDecl is a field as written in a body.
type FieldDecl struct {
	Name      string
	Type      TypeRef
	GroupedBy *FieldRef // "grouped by Decl.field": the field takes that field's type
	Modifiers []string  // in source order
	Default   *Literal  // nil when absent
	Semantics string    // a semantic annotation ("name : semantics"), rarely used
	Doc       string
	Pos       Pos // of the name
}

// Has reports whether the field carries the modifier.
func (f *FieldDecl) Has(modifier string) bool {
	for _, m := range f.Modifiers {
		if m == modifier {
			return true
		}
	}
	return false
}

// FieldRef names a field of another declaration: "TraceMetadata.traceId".
type FieldRef struct {
	Decl  Ref
	Field string
	Pos   Pos // of the field name
}

// TypeRef is a written type: a base type and zero or more array
// dimensions. Name is empty for a field that takes its type from a
// "grouped by" reference.
type TypeRef struct {
	Name string      // as written: "long", "String"
	Kind record.Kind // Invalid when Name is empty
	Dims []int       // one entry per "[]": the size written inside, 0 when none
	Pos  Pos
}

// String renders the type as written ("long", "int[3]", "string[]").
func (t TypeRef) String() string {
	var b strings.Builder
	b.WriteString(t.Name)
	for _, d := range t.Dims {
		b.WriteByte('[')
		if d > 0 {
			b.WriteString(strconv.Itoa(d))
		}
		b.WriteByte(']')
	}
	return b.String()
}

// Const is "const type NAME = value". Constants are not fields.
type Const struct {
	Name  string
	Type  TypeRef
	Value *Literal
	Doc   string
	Pos   Pos // of the name
}

// Alias is "alias field as name": a second getter name for an existing
// field. It neither renames nor adds a field.
type Alias struct {
	Field string // the aliased field
	Name  string // the additional name
	Pos   Pos    // of the new name
}

// LitKind is the kind of a literal.
type LitKind uint8

// The literal kinds. Ident is a reference by name: a constant of the type
// (NO_SESSION_ID) or a built-in value (KIEKER_VERSION); it is resolved by
// the Model, never rejected.
const (
	LitInt LitKind = iota + 1
	LitFloat
	LitString
	LitBool
	LitIdent
	LitArray
)

// Literal is a default or constant value.
type Literal struct {
	Kind  LitKind
	Text  string    // the source text, quotes included for strings
	Str   string    // LitString: the decoded value; LitIdent: the name
	Int   int64     // LitInt
	Float float64   // LitFloat
	Bool  bool      // LitBool
	Elems []Literal // LitArray
	Pos   Pos
}
