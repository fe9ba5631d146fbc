package eql

import (
	"errors"
	"strings"
	"testing"
)

// TestParseTree checks the tree Parse builds (fully parenthesised):
// precedence, associativity, literals, comments, names.
func TestParseTree(t *testing.T) {
	tests := []struct{ in, want string }{
		// precedence, loosest first: or, and, not, comparisons, | ^, &, + -, * / %, prefix - ~
		{"a or b and c", "(or a (and b c))"},
		{"a and b or c", "(or (and a b) c)"},
		{"not a and b", "(and (not a) b)"},
		{"not a = 2 and ! b = c", "(and (not (= a 2)) (not (= b c)))"},
		{"not not a", "(not (not a))"},
		{"a = 1 | 2", "(= a (| 1 2))"},
		{"a | b & c", "(| a (& b c))"},
		{"a & b + c", "(& a (+ b c))"},
		{"a ^ b | c", "(| (^ a b) c)"},
		{"a + b * c", "(+ a (* b c))"},
		{"a * b + c * d", "(+ (* a b) (* c d))"},
		{"2 * (3 + 3)", "(* 2 (+ 3 3))"},
		{"-a * b", "(* (- a) b)"},
		{"~a + 1", "(+ (~ a) 1)"},
		{"~ -1", "(~ -1)"},
		{"- -1", "(- -1)"},
		{"-(1)", "(- 1)"},
		{"a - -1", "(- a -1)"},
		{"a-1", "(- a 1)"},
		{"a < b = c", "(= (< a b) c)"},
		// left associativity
		{"a - b - c", "(- (- a b) c)"},
		{"a / b / c", "(/ (/ a b) c)"},
		{"a or b or c", "(or (or a b) c)"},
		{"a - (b - c)", "(- a (- b c))"},
		// spellings
		{"a == 1 && b <> 2 || c != 3", "(or (and (= a 1) (!= b 2)) (!= c 3))"},
		{"a AND b Or NOT c", "(or (and a b) (not c))"},
		{"x = null", "(isnull x)"},
		{"null == x", "(isnull x)"},
		{"x <> null", "(notnull x)"},
		{"x != (null)", "(notnull x)"},
		{"x < null", "(< x null)"},
		{"a + b = null", "(isnull (+ a b))"},
		{"class ~= 'Dao'", "(~= class 'Dao')"},
		{"class ~= ('Dao')", "(~= class 'Dao')"},
		// literals
		{"123", "123"},
		{"0x0f", "15"},
		{"-0x04", "-4"},
		{"1L", "1"},
		{"-0x0fL", "-15"},
		{"9223372036854775807", "9223372036854775807"},
		{"-9223372036854775808", "-9223372036854775808"},
		{"1.5", "1.5"},
		{"2e3", "2000.0"},
		{"1.25E-2", "0.0125"},
		{"-0.0", "-0.0"},
		{"10ns", "10ns"},
		{"20us", "20us"},
		{"1.25us", "1250ns"},
		{"123.456789ms", "123456789ns"},
		{"1.5s", "1500ms"},
		{"1s", "1s"},
		{"2m", "2m"},
		{"90m", "90m"},
		{"120m", "2h"},
		{"24h", "24h"},
		{"0ms", "0s"},
		{"1.0000000009s", "1s"},
		{"-500ms", "-500ms"},
		{"'abc'", "'abc'"},
		{`"abc"`, "'abc'"},
		{`'ab\ncd'`, `'ab\ncd'`},
		{`"it's"`, `'it\'s'`},
		{`'\t\b\r\f\\\"\''`, `'\t\b\r\f\\"\''`},
		{`''`, `''`},
		{`'\d+\.\(x\)'`, `'\\d+\\.\\(x\\)'`}, // other escapes keep the backslash
		{`'\\d'`, `'\\d'`},
		{"'zażółć'", "'zażółć'"},
		{"null", "null"},
		{"TRUE", "true"},
		{"false", "false"},
		// names
		{"method", "method"},
		{"type", "trace"},
		{"http.status_code", "http.status_code"},
		{"a.b.c_1", "a.b.c_1"},
		{"`method`", "`method`"},
		{"`my-key`", "`my-key`"},
		{"`null`", "`null`"},
		{"`plain`", "plain"},
		{"Method", "Method"},
		// comments and white space
		{"a -- comment\n= 1", "(= a 1)"},
		{"a // comment\r\n= 1 // end", "(= a 1)"},
		{"a--b", "a"},
		{"\t a\n=\f1 ", "(= a 1)"},
		{"pct > 50 --deep", "(> pct 50)"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			e, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := e.sexpr(); got != tc.want {
				t.Errorf("tree %s, want %s", got, tc.want)
			}
		})
	}
}

// TestString checks the normalised rendering.
func TestString(t *testing.T) {
	tests := []struct{ in, want string }{
		{`time>500ms AND class~="Dao"`, `time > 500ms and class ~= 'Dao'`},
		{"errors > 0 or http.status_code >= 500", "errors > 0 or http.status_code >= 500"},
		{"trace = 'GET /api/orders' and pct > 50 --deep", "trace = 'GET /api/orders' and pct > 50"},
		{"a == 1 && b <> 2 || !c", "a = 1 and b != 2 or not c"},
		{"(a or b) and c", "(a or b) and c"},
		{"a or (b and c)", "a or b and c"},
		{"((a))", "a"},
		{"a - (b - c)", "a - (b - c)"},
		{"(a - b) - c", "a - b - c"},
		{"(a * b) + c", "a * b + c"},
		{"a * (b + c)", "a * (b + c)"},
		{"not (a and b)", "not (a and b)"},
		{"not (a = b)", "not a = b"},
		{"- -4", "- -4"},
		{"-(-4)", "- -4"},
		{"-(4)", "-(4)"},
		{"- - - a", "- - -a"},
		{"-(a + b)", "-(a + b)"},
		{"~(-a)", "~-a"},
		{"a - -4", "a - -4"},
		{"null = x", "x = null"},
		{"(a = b) = null", "a = b = null"},
		{"(a or b) = null", "(a or b) = null"},
		{"0x10L", "16"},
		{"`type` = type", "`type` = trace"},
		{"`a b` = 1", "`a b` = 1"},
		{"s = 'x\\ny'", `s = 'x\ny'`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			e, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := e.String()
			if got != tc.want {
				t.Errorf("String() = %s, want %s", got, tc.want)
			}
			e2, err := Parse(got)
			if err != nil {
				t.Fatalf("Parse(String()): %v", err)
			}
			if e2.sexpr() != e.sexpr() {
				t.Errorf("Parse(String()) = %s, want %s", e2.sexpr(), e.sexpr())
			}
		})
	}
	var nilExpr *Expr
	if nilExpr.String() != "" {
		t.Error("(*Expr)(nil).String() is not empty")
	}
}

// TestParseErrors checks that errors name the position and the reason.
func TestParseErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `eql: column 1: empty expression`},
		{"  -- only a comment", `eql: column 20: empty expression`},
		{`time > 500ms and (class ~= "Dao"))`, `eql: column 34: unexpected ")"`},
		{"a = ", `eql: column 5: unexpected end of expression`},
		{"a and", `eql: column 6: unexpected end of expression`},
		{"(a = 1", `eql: column 7: missing ")" to close the "(" at column 1`},
		{"((a = 1)", `eql: column 9: missing ")" to close the "(" at column 1`},
		{"(a b)", `eql: column 4: unexpected "b": want an operator or ")"`},
		{"a b", `eql: column 3: unexpected "b": want an operator`},
		{"a = = 1", `eql: column 5: unexpected "="`},
		{"and", `eql: column 1: unexpected "and"`},
		{"()", `eql: column 2: unexpected ")"`},
		{"a # 1", `eql: column 3: unexpected character '#'`},
		{"a = 'abc", `eql: column 5: unterminated string`},
		{"a = 'ab\ncd'", `eql: line 1, column 5: unterminated string`},
		{`a = 'ab\`, `eql: column 5: unterminated string`},
		{"a = `b", "eql: column 5: unterminated quoted name"},
		{"``", "eql: column 1: empty quoted name"},
		{"a = 5min", `eql: column 5: malformed number "5min" (durations end in ns, us, ms, s, m or h)`},
		{"a = 5.", `eql: column 5: malformed number "5."`},
		{"a = 5.x", `eql: column 5: malformed number "5.x"`},
		{"a = 1.5L", `eql: column 5: malformed number "1.5L"`},
		{"a = 0x", `eql: column 5: malformed number "0x"`},
		{"a = 0xfg", `eql: column 5: malformed number "0xfg"`},
		{"a = 1e3s", `eql: column 5: a duration has no exponent: "1e3s"`},
		{"a = 9223372036854775808", `eql: column 5: integer 9223372036854775808 out of range`},
		{"a = -9223372036854775809", `eql: column 5: integer -9223372036854775809 out of range`},
		{"a = 99999999999999999999", `eql: column 5: integer 99999999999999999999 out of range`},
		{"a = 0x10000000000000000", `eql: column 5: integer 0x10000000000000000 out of range`},
		{"a = 1e400", `eql: column 5: number 1e400 out of range`},
		{"a = 300000000h", `eql: column 5: duration 300000000h out of range`},
		{"a ~= b", `eql: column 6: "~=" takes a string literal (the regular expression) on its right`},
		{"a ~= 'x' + 'y'", `eql: column 6: "~=" takes a string literal (the regular expression) on its right`},
		{"a ~= null", `eql: column 6: "~=" takes a string literal (the regular expression) on its right`},
		{"a ~= '(x'", "eql: column 6: bad regular expression: missing closing ): `(x`"},
		{`a ~= '\\C'`, "eql: column 6: bad regular expression: invalid escape sequence: `\\C`"},
		{"a ~= '.{1000}.{1000}'", "eql: column 6: regular expression too large (2002 instructions, at most 1000)"},
		{"a =~ 'x'", `eql: column 3: "=~" is not an operator: write "~=" for a regular-expression match (or "= ~" for a bitwise complement)`},
		{"count(x) > 1", `eql: column 6: unexpected "(": EQL has no functions`},
		{"a.", `eql: column 2: unexpected character '.'`},
		{"a = 'zażółć' )", `eql: column 14: unexpected ")"`},
		{"a = 1\nand b = 2)", `eql: line 2, column 10: unexpected ")"`},
		{"a = 1 -- c\n  or (b = 2", `eql: line 2, column 12: missing ")" to close the "(" at line 2, column 6`},
		{"a = 'x\xffy'", `eql: column 7: invalid UTF-8`},
		{"a = '" + strings.Repeat("x", 40) + "' b", `eql: column 48: unexpected "b": want an operator`},
		{"a = 1 '" + strings.Repeat("x", 40) + "'", `eql: column 7: unexpected "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…": want an operator`},
		{strings.Repeat("a or ", 1000) + "a", `eql: column 4097: expression longer than 4096 bytes`},
		{strings.Repeat("(", 65) + "a" + strings.Repeat(")", 65), `eql: column 65: nested deeper than 64 levels`},
		{strings.Repeat("not ", 65) + "a", `eql: column 257: nested deeper than 64 levels`},
		{strings.Repeat("-", 30) + "a", `eql: unexpected`}, // "--" is a comment: nothing left
	}
	for _, tc := range tests {
		name := tc.in
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			e, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse = %s, want error %s", e, tc.want)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T, want *SyntaxError", err)
			}
			if tc.want == "eql: unexpected" {
				return
			}
			if err.Error() != tc.want {
				t.Errorf("error\n%s\nwant\n%s", err, tc.want)
			}
			if se.Offset < 0 || se.Offset > len(tc.in) || se.Column < 1 || se.Line < 1 {
				t.Errorf("position %+v out of the input", se)
			}
		})
	}
}

// TestParseLimits checks that expressions at the limits parse.
func TestParseLimits(t *testing.T) {
	ok := []string{
		strings.Repeat("(", 64) + "a" + strings.Repeat(")", 64),
		strings.Repeat("not ", 64) + "a",
		strings.Repeat("- ", 63) + "-1",
		strings.Repeat("a = 1 or ", 454) + "a = 1", // 4091 bytes, a left-deep tree of 454 ors
		"a ~= '" + strings.Repeat("[a-z]", 100) + "'",
	}
	for _, in := range ok {
		if len(in) > MaxLen {
			t.Fatalf("test input of %d bytes", len(in))
		}
		if _, err := Parse(in); err != nil {
			t.Errorf("Parse(%.40q…): %v", in, err)
		}
	}
}
