package trace

import (
	"slices"
	"strconv"
)

// appendFlatAttrsJSON appends to dst what ParseAttrsJSON reads of what
// AttrsJSON writes of plain attributes: an object without spaces or
// escapes whose values are strings, numbers and booleans, its keys in
// order and unique. It returns dst as it was, and false, for anything
// else (ParseAttrsJSON then asks encoding/json). The strings it returns
// are parts of s.
func appendFlatAttrsJSON(dst []Attr, s string) ([]Attr, bool) {
	orig := dst
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return orig, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			return orig, false
		case ':':
			n++
		}
	}
	out := slices.Grow(dst, n)
	first := len(out)
	i := 1
	for i < len(s)-1 {
		if s[i] != '"' {
			return orig, false
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			j++
		}
		if j+1 >= len(s) || s[j+1] != ':' {
			return orig, false
		}
		key := s[i+1 : j]
		if len(out) > first && out[len(out)-1].Key >= key {
			return orig, false // out of order or twice
		}
		i = j + 2
		var a Attr
		switch {
		case i < len(s) && s[i] == '"':
			j = i + 1
			for j < len(s) && s[j] != '"' {
				j++
			}
			if j >= len(s)-1 {
				return orig, false
			}
			if !plainJSONText(s[i+1 : j]) {
				return orig, false
			}
			a = Attr{Key: key, Value: s[i+1 : j], Type: TypeString}
			i = j + 1
		default:
			j = i
			for j < len(s)-1 && s[j] != ',' {
				j++
			}
			v := s[i:j]
			switch {
			case v == "true" || v == "false":
				a = Attr{Key: key, Value: v, Type: TypeBool}
			case jsonNumber(v):
				a = Attr{Key: key, Value: v, Type: TypeDouble}
				if _, err := strconv.ParseInt(v, 10, 64); err == nil {
					a.Type = TypeInt
				} else if _, err := strconv.ParseFloat(v, 64); err != nil {
					return orig, false // beyond a double: encoding/json's answer
				}
			default:
				return orig, false
			}
			i = j
		}
		out = append(out, a)
		if s[i] == ',' {
			i++
			if i >= len(s)-1 {
				return orig, false
			}
		} else if i != len(s)-1 {
			return orig, false
		}
	}
	return out, true
}

// plainJSONText reports whether t may stand between quotes in JSON as it
// is (no control characters; escapes were ruled out before) and is valid
// UTF-8 ASCII (anything else goes the slow way, which replaces invalid
// bytes as encoding/json does).
func plainJSONText(t string) bool {
	for i := 0; i < len(t); i++ {
		if t[i] < 0x20 || t[i] >= 0x80 {
			return false
		}
	}
	return true
}

// jsonNumber reports whether v is a number in JSON's grammar.
func jsonNumber(v string) bool {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	digits := func() int {
		k := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		return i - k
	}
	start := i
	if d := digits(); d == 0 || d > 1 && v[start] == '0' {
		return false
	}
	if i < len(v) && v[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(v)
}
