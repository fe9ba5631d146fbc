package eql

import (
	"errors"
	"testing"
)

// FuzzParse: Parse never panics; its errors are *SyntaxError with a
// position inside the input; what parses renders to an equivalent
// expression (checkRoundTrip), and Match and MatchTrace never panic on
// the sample traces. The seeds are zico-style queries.
func FuzzParse(f *testing.F) {
	for _, q := range sampleQueries {
		f.Add(q)
	}
	for _, q := range []string{
		"", "(", ")", "'", "`", "--", "a ~= '(?i)x{2,5}'", "0x", "1.5e", "5min",
		"- - -1", "~~~~1", "a = 'x\\", "`a\nb`", "a=~'x'", "\xff", "'\\u00e9'",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, in string) {
		e, err := Parse(in)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("%q: error %T, want *SyntaxError", in, err)
			}
			if se.Offset < 0 || se.Offset > len(in) || se.Line < 1 || se.Column < 1 || se.Msg == "" {
				t.Fatalf("%q: bad position %+v", in, se)
			}
			return
		}
		checkRoundTrip(t, in, e)
	})
}
