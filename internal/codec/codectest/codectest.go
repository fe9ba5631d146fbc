// Package codectest holds what the codecs' tests share: byte strings
// written as annotated hex.
package codectest

import (
	"encoding/hex"
	"strings"
	"testing"
)

// Hex parses hex with spaces and quoted ASCII: `EF "abc" 02`; a malformed
// string fails tb.
func Hex(tb testing.TB, s string) []byte {
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
