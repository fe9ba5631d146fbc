// Package jsonl renders records as JSON lines, the form `tracebridge cat
// --json` prints:
//
//	{"type":"<class>","loggingTimestamp":N,"fields":{"<name>":value,…}}
//
// Fields appear in catalogue order. Integers (longs included) are written
// as exact JSON numbers; floats and doubles in their shortest round-trip
// form, with NaN and the infinities as the strings "NaN", "Infinity" and
// "-Infinity" (JSON has no such numbers); chars as one-character strings;
// arrays as JSON arrays; a null string (record.NullString, JFR's null) as
// null. Invalid UTF-8 in strings becomes U+FFFD.
package jsonl

import (
	"math"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/jsonstr"
	"github.com/tracebridge/tracebridge/internal/record"
)

// AppendRecord appends the JSON object for r and a newline to dst.
func AppendRecord(dst []byte, r *record.Record) []byte {
	dst = append(dst, `{"type":`...)
	dst = jsonstr.AppendString(dst, r.Type.Name)
	dst = append(dst, `,"loggingTimestamp":`...)
	dst = strconv.AppendInt(dst, r.LoggingTimestamp, 10)
	dst = append(dst, `,"fields":{`...)
	for i, f := range r.Type.Fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonstr.AppendString(dst, f.Name)
		dst = append(dst, ':')
		if i >= len(r.Values) {
			dst = append(dst, "null"...)
			continue
		}
		v := r.Values[i]
		if f.Array {
			dst = append(dst, '[')
			if l := v.List(); l != nil {
				for j, item := range l.Items {
					if j > 0 {
						dst = append(dst, ',')
					}
					dst = appendValue(dst, f.Kind, item)
				}
			}
			dst = append(dst, ']')
			continue
		}
		dst = appendValue(dst, f.Kind, v)
	}
	return append(dst, "}}\n"...)
}

func appendValue(dst []byte, k record.Kind, v record.Value) []byte {
	switch k {
	case record.Bool:
		return strconv.AppendBool(dst, v.Bool())
	case record.Float:
		return appendFloat(dst, float64(v.Float()), 32)
	case record.Double:
		return appendFloat(dst, v.Double(), 64)
	case record.Char:
		return jsonstr.AppendString(dst, string(rune(uint16(v.Int()))))
	case record.String:
		if v.IsNull() {
			return append(dst, "null"...) // a null string (JFR's), not ""
		}
		return jsonstr.AppendString(dst, v.Str())
	}
	return strconv.AppendInt(dst, v.Int(), 10)
}

func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// AppendString appends s as a JSON string, as AppendRecord writes
// strings (jsonstr's rules).
func AppendString(dst []byte, s string) []byte { return jsonstr.AppendString(dst, s) }
