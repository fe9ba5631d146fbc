// Package textline renders records as lines for people, the form
// `tracebridge cat` and `tracebridge tail` print:
//
//	<ShortType> loggingTimestamp=N <name>=<value> …
//
// Fields appear in catalogue order; strings and chars are Go-quoted,
// arrays are bracketed lists of their items separated by spaces, other
// values are in the record model's own text form (record.Value.Format).
// The form is for reading, not for parsing: jsonl and the Kieker ASCII
// codec are the machine-readable ones.
package textline

import (
	"strconv"

	"github.com/tracebridge/tracebridge/internal/record"
)

// AppendRecord appends the line for r and a newline to dst.
func AppendRecord(dst []byte, r *record.Record) []byte {
	dst = append(dst, r.Type.ShortName()...)
	dst = append(dst, " loggingTimestamp="...)
	dst = strconv.AppendInt(dst, r.LoggingTimestamp, 10)
	for i, f := range r.Type.Fields {
		dst = append(dst, ' ')
		dst = append(dst, f.Name...)
		dst = append(dst, '=')
		v := r.Values[i]
		if f.Array {
			dst = append(dst, '[')
			if l := v.List(); l != nil {
				for j, it := range l.Items {
					if j > 0 {
						dst = append(dst, ' ')
					}
					dst = appendValue(dst, f.Kind, it)
				}
			}
			dst = append(dst, ']')
			continue
		}
		dst = appendValue(dst, f.Kind, v)
	}
	return append(dst, '\n')
}

func appendValue(dst []byte, k record.Kind, v record.Value) []byte {
	switch k {
	case record.String:
		return strconv.AppendQuote(dst, v.Str())
	case record.Char:
		return strconv.AppendQuoteRune(dst, rune(uint16(v.Int())))
	}
	return append(dst, v.Format(k)...)
}
