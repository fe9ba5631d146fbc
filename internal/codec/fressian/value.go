package fressian

import "strconv"

// Value is any Fressian value, as ReadValue returns it and AppendValue
// writes it. Only the fields of its Kind are set.
type Value struct {
	Kind Kind
	// Tag is the tag of a KindStruct ("com.jitlogic.zorka.Symbol_v1", or a
	// built-in tag such as "uuid") and the element type of a KindArray
	// ("int[]", "long[]", "float[]", "double[]", "boolean[]", "Object[]").
	Tag string
	// Int holds a KindInt, and a KindBool as 1 (true) or 0 (false).
	Int int64
	// Float holds a KindFloat or KindDouble.
	Float float64
	// Str holds a KindString.
	Str string
	// Bytes holds a KindBytes.
	Bytes []byte
	// Items holds the elements of a KindList, KindSet or KindArray, the
	// keys and values of a KindMap alternately (k0, v0, k1, v1, …), and the
	// fields of a KindStruct.
	Items []Value
}

// Null, Bool, Int, Double, Float, String, List and Struct make Values.
func Null() Value               { return Value{Kind: KindNull} }
func Bool(b bool) Value         { return Value{Kind: KindBool, Int: b2i(b)} }
func Int(v int64) Value         { return Value{Kind: KindInt, Int: v} }
func Double(v float64) Value    { return Value{Kind: KindDouble, Float: v} }
func Float(v float32) Value     { return Value{Kind: KindFloat, Float: float64(v)} }
func String(s string) Value     { return Value{Kind: KindString, Str: s} }
func Bytes(b []byte) Value      { return Value{Kind: KindBytes, Bytes: b} }
func List(items ...Value) Value { return Value{Kind: KindList, Items: items} }
func Map(kvs ...Value) Value    { return Value{Kind: KindMap, Items: kvs} }
func Set(items ...Value) Value  { return Value{Kind: KindSet, Items: items} }
func Array(tag string, items ...Value) Value {
	return Value{Kind: KindArray, Tag: tag, Items: items}
}
func Struct(tag string, fields ...Value) Value {
	return Value{Kind: KindStruct, Tag: tag, Items: fields}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// String formats v for humans and tests: Java-like literals, lists in
// brackets, maps in braces, structs as tag{fields}.
func (v Value) String() string { return string(v.AppendText(nil)) }

// AppendText appends the text of String to dst.
func (v Value) AppendText(dst []byte) []byte {
	switch v.Kind {
	case KindNull:
		return append(dst, "null"...)
	case KindBool:
		return strconv.AppendBool(dst, v.Int != 0)
	case KindInt:
		return strconv.AppendInt(dst, v.Int, 10)
	case KindFloat:
		return strconv.AppendFloat(dst, v.Float, 'g', -1, 32)
	case KindDouble:
		return strconv.AppendFloat(dst, v.Float, 'g', -1, 64)
	case KindString:
		return strconv.AppendQuote(dst, v.Str)
	case KindBytes:
		dst = append(dst, "bytes["...)
		dst = strconv.AppendInt(dst, int64(len(v.Bytes)), 10)
		return append(dst, ']')
	case KindList, KindSet, KindArray:
		open, close := byte('['), byte(']')
		if v.Kind == KindSet {
			dst = append(dst, '#')
			open, close = '{', '}'
		}
		if v.Kind == KindArray {
			dst = append(dst, v.Tag...)
		}
		dst = append(dst, open)
		for i, it := range v.Items {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = it.AppendText(dst)
		}
		return append(dst, close)
	case KindMap:
		dst = append(dst, '{')
		for i, it := range v.Items {
			switch {
			case i == 0:
			case i%2 == 1:
				dst = append(dst, ": "...)
			default:
				dst = append(dst, ", "...)
			}
			dst = it.AppendText(dst)
		}
		return append(dst, '}')
	case KindStruct:
		dst = append(dst, v.Tag...)
		dst = append(dst, '{')
		for i, it := range v.Items {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = it.AppendText(dst)
		}
		return append(dst, '}')
	}
	return append(dst, "invalid"...)
}

func itoa(v int) string { return strconv.Itoa(v) }
