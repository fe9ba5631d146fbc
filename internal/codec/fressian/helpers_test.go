package fressian

import (
	"encoding/hex"
	"strings"
	"testing"
)

// hx parses hex with spaces and quoted ASCII: `EF "abc" 02`.
func hx(tb testing.TB, s string) []byte {
	tb.Helper()
	var out []byte
	for len(s) > 0 {
		s = strings.TrimLeft(s, " \n\t")
		if s == "" {
			break
		}
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				tb.Fatalf("unterminated quote in %q", s)
			}
			out = append(out, s[1:1+end]...)
			s = s[end+2:]
			continue
		}
		tok := s
		if i := strings.IndexAny(s, " \n\t\""); i >= 0 {
			tok = s[:i]
		}
		b, err := hex.DecodeString(tok)
		if err != nil {
			tb.Fatalf("bad hex %q: %v", tok, err)
		}
		out = append(out, b...)
		s = s[len(tok):]
	}
	return out
}

// decodeAll reads every top-level value of b.
func decodeAll(b []byte, opts Options) ([]Value, error) {
	d := NewDecoder(opts)
	d.Reset(b)
	var vs []Value
	for d.More() {
		v := d.ReadValue()
		if d.Err() != nil {
			break
		}
		vs = append(vs, v)
	}
	return vs, d.Err()
}
