package record

import (
	"fmt"
	"strings"
)

// Field is one field of a record type.
type Field struct {
	Name  string
	Kind  Kind // the element kind when Array is set
	Array bool
}

// String renders the field in IRL syntax ("long traceId", "string[] values").
func (f Field) String() string {
	if f.Array {
		return f.Kind.String() + "[] " + f.Name
	}
	return f.Kind.String() + " " + f.Name
}

// Type is a record type: a fully qualified name and its fields in
// serialization order. The logging timestamp every record carries is not a
// field. A Type is immutable after NewType.
type Type struct {
	Name   string
	Fields []Field

	// Legacy holds older serializations of the type, tried by readers when
	// a record does not fit the current layout (for example the pre-1.6
	// OperationExecutionRecord with its leading experimentId).
	Legacy []Layout

	fixedSize int  // binary size of the fields when no field has a variable size
	variable  bool // some field is a string or an array
	strings   int  // number of String fields (scalars only)
}

// Layout is an older serialization of a type. Fields are in wire order;
// Target[i] is the index in Type.Fields that wire field i fills, or -1 when
// the wire field is read and dropped.
type Layout struct {
	Fields []Field
	Target []int
}

// NewType builds a type. It returns an error for an empty name, a field
// without a name or kind, or a duplicate field name.
func NewType(name string, fields ...Field) (*Type, error) {
	if name == "" {
		return nil, fmt.Errorf("record type: empty name")
	}
	t := &Type{Name: name, Fields: append([]Field(nil), fields...)}
	seen := make(map[string]bool, len(fields))
	for i, f := range t.Fields {
		if f.Name == "" {
			return nil, fmt.Errorf("record type %s: field %d has no name", name, i)
		}
		if f.Kind <= Invalid || f.Kind > String {
			return nil, fmt.Errorf("record type %s: field %s has no valid kind", name, f.Name)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("record type %s: duplicate field %s", name, f.Name)
		}
		seen[f.Name] = true
		switch {
		case f.Array:
			t.variable = true
		case f.Kind == String:
			t.variable = true
			t.strings++
		default:
			t.fixedSize += f.Kind.Size()
		}
	}
	return t, nil
}

// MustType is NewType for static tables; it panics on a malformed type.
func MustType(name string, fields ...Field) *Type {
	t, err := NewType(name, fields...)
	if err != nil {
		panic(err)
	}
	return t
}

// ShortName returns the name without its package.
func (t *Type) ShortName() string {
	if i := strings.LastIndexByte(t.Name, '.'); i >= 0 {
		return t.Name[i+1:]
	}
	return t.Name
}

// FieldIndex returns the index of the named field, or -1.
func (t *Type) FieldIndex(name string) int {
	for i := range t.Fields {
		if t.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

// FixedSize returns the binary size of the fields that have a fixed size
// (everything but strings and arrays), and whether that is the whole record.
func (t *Type) FixedSize() (size int, complete bool) { return t.fixedSize, !t.variable }

// StringFields returns the number of scalar String fields.
func (t *Type) StringFields() int { return t.strings }

// SameFields reports whether two types have the same fields in the same order.
func (t *Type) SameFields(o *Type) bool {
	if len(t.Fields) != len(o.Fields) {
		return false
	}
	for i := range t.Fields {
		if t.Fields[i] != o.Fields[i] {
			return false
		}
	}
	return true
}

// String renders the type as an IRL-like one-liner for messages.
func (t *Type) String() string {
	var b strings.Builder
	b.WriteString(t.Name)
	b.WriteString(" {")
	for i, f := range t.Fields {
		if i > 0 {
			b.WriteString(";")
		}
		b.WriteString(" ")
		b.WriteString(f.String())
	}
	b.WriteString(" }")
	return b.String()
}
