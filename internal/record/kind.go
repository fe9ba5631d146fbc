package record

import "fmt"

// Kind is the type of a field value.
type Kind uint8

// The field kinds. Their binary sizes are Kieker's: boolean and byte 1,
// short and char 2, int and float 4, long and double 8; a string is an
// encoding-specific reference (registry id or inline bytes).
const (
	Invalid Kind = iota
	Bool
	Byte
	Short
	Int
	Long
	Float
	Double
	Char
	String
)

var kindNames = [...]string{
	Invalid: "invalid",
	Bool:    "boolean",
	Byte:    "byte",
	Short:   "short",
	Int:     "int",
	Long:    "long",
	Float:   "float",
	Double:  "double",
	Char:    "char",
	String:  "string",
}

// String returns the IRL name of the kind (boolean, byte, …, string).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Size returns the number of bytes of the kind in Kieker's binary encodings,
// or 0 for String, whose size depends on the encoding.
func (k Kind) Size() int {
	switch k {
	case Bool, Byte:
		return 1
	case Short, Char:
		return 2
	case Int, Float:
		return 4
	case Long, Double:
		return 8
	}
	return 0
}

// ParseKind maps an IRL or Java primitive type name to a Kind. Java's boxed
// names and "String" are accepted too.
func ParseKind(name string) (Kind, bool) {
	switch name {
	case "boolean", "Boolean":
		return Bool, true
	case "byte", "Byte":
		return Byte, true
	case "short", "Short":
		return Short, true
	case "int", "Integer":
		return Int, true
	case "long", "Long":
		return Long, true
	case "float", "Float":
		return Float, true
	case "double", "Double":
		return Double, true
	case "char", "Character":
		return Char, true
	case "string", "String":
		return String, true
	}
	return Invalid, false
}
