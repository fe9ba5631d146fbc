package kieker

import (
	"strconv"
	"unicode/utf8"

	"github.com/tracebridge/tracebridge/internal/javanum"
	"github.com/tracebridge/tracebridge/internal/record"
)

// AppendLine appends r as a Kieker ASCII line "$<typeID>;<loggingTimestamp>;
// <field>;…\n" (with the newline). typeID is the id of r's class name in
// the log's kieker.map (see Registry and AppendMapEntry).
//
// Values are written as Kieker writes them: integers in decimal, booleans
// true/false, doubles and floats as Java's Double/Float.toString, chars as
// the character, arrays as their length followed by the elements. Strings
// are written raw except where Kieker's reader would misread them: a ';'
// the reader would take for a separator gets a backslash, a backslash the
// reader would pair with a line end or separator is doubled, and CR and LF
// are written as the two characters \r and \n. So re-writing a line Kieker
// wrote reproduces it byte for byte, and every string can be read back —
// with the backslashes Kieker's reader keeps: a lone ';' comes back as \;,
// CR and LF as \r and \n, a trailing unpaired backslash as \\ (except in
// the last value of the line, where it stays single).
//
// A char that cannot stand in a line (CR, LF, a lone surrogate) is written
// as '?', as Java writes unmappable characters. An absent array (nil List)
// is written as an empty one. Values are cut to their kind's width.
func AppendLine(dst []byte, typeID int32, r *record.Record) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(typeID), 10)
	dst = append(dst, ';')
	dst = strconv.AppendInt(dst, r.LoggingTimestamp, 10)
	lastField := len(r.Type.Fields) - 1
	for i, f := range r.Type.Fields {
		var v record.Value
		if i < len(r.Values) {
			v = r.Values[i]
		}
		dst = append(dst, ';')
		if !f.Array {
			dst = appendText(dst, f.Kind, v, i == lastField)
			continue
		}
		var items []record.Value
		if l := v.List(); l != nil {
			items = l.Items
		}
		dst = strconv.AppendInt(dst, int64(len(items)), 10)
		for j, it := range items {
			dst = append(dst, ';')
			dst = appendText(dst, f.Kind, it, i == lastField && j == len(items)-1)
		}
	}
	return append(dst, '\n')
}

// appendText appends one value of kind k in Kieker's text form; endOfLine
// says whether it is the last value of the line.
func appendText(dst []byte, k record.Kind, v record.Value, endOfLine bool) []byte {
	switch k {
	case record.String:
		return appendTextString(dst, v.Str(), endOfLine)
	case record.Long:
		return strconv.AppendInt(dst, v.Int(), 10)
	case record.Int:
		return strconv.AppendInt(dst, int64(int32(v.Int())), 10)
	case record.Double:
		return javanum.AppendDouble(dst, v.Double())
	case record.Bool:
		if v.Bool() {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case record.Float:
		return javanum.AppendFloat(dst, v.Float())
	case record.Short:
		return strconv.AppendInt(dst, int64(int16(v.Int())), 10)
	case record.Byte:
		return strconv.AppendInt(dst, int64(int8(v.Int())), 10)
	case record.Char:
		c := rune(uint16(v.Int()))
		if c == '\n' || c == '\r' || c >= 0xD800 && c <= 0xDFFF {
			c = '?'
		}
		return utf8.AppendRune(dst, c)
	}
	return dst
}

// textSpecial marks the bytes appendTextString looks at.
var textSpecial = [256]bool{'\\': true, ';': true, '\n': true, '\r': true}

// appendTextString appends s so that Kieker's reader (and LineDecoder)
// reads it back: raw, except for ';' outside a backslash pair, a backslash
// with nothing to pair with, CR and LF. At the end of the line a trailing
// backslash stays single, as Kieker writes it (the reader keeps it; doubling
// it would change the value).
func appendTextString(dst []byte, s string, endOfLine bool) []byte {
	// Fast path: nothing to look at twice.
	clean := 0
	for clean < len(s) && !textSpecial[s[clean]] {
		clean++
	}
	if clean == len(s) {
		return append(dst, s...)
	}
	dst = append(dst, s[:clean]...)
	for i := clean; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 < len(s) && s[i+1] != '\n' && s[i+1] != '\r' {
				// The reader keeps a backslash and the next character.
				dst = append(dst, '\\', s[i+1])
				i++
			} else if i+1 == len(s) && endOfLine {
				dst = append(dst, '\\')
			} else {
				dst = append(dst, '\\', '\\')
			}
		case ';':
			dst = append(dst, '\\', ';')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
