// Package jsonstr writes JSON strings: the one escaper of tracebridge's
// JSON outputs (cat --json and the stream's JSON parts, traces --json,
// OTLP attribute values printed as JSON, the OTLP/HTTP receiver's error
// bodies).
//
// The rules are encoding/json's with HTML escaping off (what
// json.Encoder writes after SetEscapeHTML(false), and what pdata's
// Value.AsString writes, so OTLP values compare byte for byte):
//   - '"' and '\\' are escaped with a backslash;
//   - \b, \f, \n, \r and \t are written in their short forms, every other
//     byte below 0x20 as \u00XX (lower-case hex);
//   - U+2028 and U+2029 are written as \u2028 and \u2029 (JavaScript
//     reads them as line ends);
//   - each byte of invalid UTF-8 is written as \ufffd;
//   - everything else, '<', '>', '&' and a literal U+FFFD included, is
//     copied as it is: the outputs are JSON, never HTML.
//
// The functions append to the caller's slice and allocate only when it
// must grow.
package jsonstr

import (
	"unicode/utf8"
	"unsafe"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s to dst as a quoted JSON string.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendBytes appends s to dst as a quoted JSON string, as AppendString
// does; it neither keeps nor changes s.
func AppendBytes(dst, s []byte) []byte {
	return AppendString(dst, unsafe.String(unsafe.SliceData(s), len(s)))
}
