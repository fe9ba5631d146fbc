package record

import (
	"math"
	"strconv"
)

// Value is one field value. Which accessor is meaningful depends on the
// field's Kind: integer kinds (Byte, Short, Int, Long, Char) and Bool use
// Int, Float and Double use Float, String uses Str, array fields use List.
//
// A Value is 32 bytes and holds no pointer for numeric kinds; strings are
// shared, never copied, so decoders that intern strings produce values that
// allocate nothing per record.
type Value struct {
	num  uint64
	str  string
	list *List
}

// List holds the elements of an array field. Elem is the element kind.
type List struct {
	Elem  Kind
	Items []Value
}

// IntValue returns a value for any integer kind (Byte, Short, Int, Long, Char).
func IntValue(v int64) Value { return Value{num: uint64(v)} }

// BoolValue returns a Bool value.
func BoolValue(b bool) Value {
	if b {
		return Value{num: 1}
	}
	return Value{}
}

// DoubleValue returns a Double value.
func DoubleValue(f float64) Value { return Value{num: math.Float64bits(f)} }

// FloatValue returns a Float value. It is stored as the float32's bits so
// that every float32 (NaN payloads included) round-trips exactly.
func FloatValue(f float32) Value { return Value{num: uint64(math.Float32bits(f))} }

// StringValue returns a String value.
func StringValue(s string) Value { return Value{str: s} }

// NullString returns a String value that is null: a source that tells a
// null string from an empty one (JFR) keeps that here. Its Str is "", so
// formats without a null (Kieker's) write it as the empty string; Equal
// tells it from "" and IsNull reports it. It allocates nothing.
func NullString() Value { return Value{num: nullString} }

// nullString marks a null String value in num, which strings do not use.
const nullString = 1

// IsNull reports whether a String value is null (NullString).
func (v Value) IsNull() bool { return v.num == nullString && v.str == "" && v.list == nil }

// ListValue returns an array value.
func ListValue(elem Kind, items []Value) Value {
	return Value{list: &List{Elem: elem, Items: items}}
}

// Int returns the value of an integer or boolean field.
func (v Value) Int() int64 { return int64(v.num) }

// Bool returns the value of a boolean field.
func (v Value) Bool() bool { return v.num != 0 }

// Double returns the value of a Double field.
func (v Value) Double() float64 { return math.Float64frombits(v.num) }

// Float returns the value of a Float field.
func (v Value) Float() float32 { return math.Float32frombits(uint32(v.num)) }

// Str returns the value of a String field.
func (v Value) Str() string { return v.str }

// List returns the elements of an array field, or nil.
func (v Value) List() *List { return v.list }

// Bits returns the raw 64 bits of a numeric value (for Double the IEEE-754
// bits, for Float the float32 bits in the low half).
func (v Value) Bits() uint64 { return v.num }

// Equal reports whether two values are identical, bit for bit for floats.
func (v Value) Equal(o Value) bool {
	if v.num != o.num || v.str != o.str {
		return false
	}
	if (v.list == nil) != (o.list == nil) {
		return false
	}
	if v.list == nil {
		return true
	}
	if v.list.Elem != o.list.Elem || len(v.list.Items) != len(o.list.Items) {
		return false
	}
	for i := range v.list.Items {
		if !v.list.Items[i].Equal(o.list.Items[i]) {
			return false
		}
	}
	return true
}

// Format renders the value of kind k for humans (not a wire format).
func (v Value) Format(k Kind) string {
	switch k {
	case Bool:
		return strconv.FormatBool(v.Bool())
	case Float:
		return strconv.FormatFloat(float64(v.Float()), 'g', -1, 32)
	case Double:
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	case Char:
		return string(rune(uint16(v.num)))
	case String:
		return v.str
	}
	return strconv.FormatInt(v.Int(), 10)
}
