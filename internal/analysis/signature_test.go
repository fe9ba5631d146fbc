package analysis

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSignature(t *testing.T) {
	for _, tc := range []struct {
		in         string
		want       Signature
		str, short string
	}{
		{"public void pkg.Class.method(int)", Signature{Modifiers: []string{"public"}, ReturnType: "void", Class: "pkg.Class", Name: "method", Params: []string{"int"}},
			"public void pkg.Class.method(int)", "method(..)"},
		{"public static synchronized a.b.T a.b.T.getInstance()", Signature{Modifiers: []string{"public", "static", "synchronized"}, ReturnType: "a.b.T", Class: "a.b.T", Name: "getInstance"},
			"public static synchronized a.b.T a.b.T.getInstance()", "getInstance()"},
		{"public static java.util.List a.L.get(a.S, java.lang.String,int)", Signature{Modifiers: []string{"public", "static"}, ReturnType: "java.util.List", Class: "a.L", Name: "get", Params: []string{"a.S", "java.lang.String", "int"}},
			"public static java.util.List a.L.get(a.S, java.lang.String, int)", "get(..)"},
		// No parentheses: a span name or a non-Java probe's operation.
		{"pkg.Class.method", Signature{Class: "pkg.Class", Name: "method"}, "pkg.Class.method()", "method()"},
		{"main", Signature{Name: "main"}, ".main()", "main()"},
		{"void main()", Signature{ReturnType: "void", Name: "main"}, "void .main()", "main()"},
		// A constructor has no return type.
		{"public a.B.<init>(int)", Signature{Modifiers: []string{"public"}, Class: "a.B", Name: "<init>", Params: []string{"int"}}, "a.B.<init>(int)", "<init>(..)"},
		// Kieker's tokenizer: empty pieces between commas vanish, blank ones stay.
		{"a.B.m(int,,long)", Signature{Class: "a.B", Name: "m", Params: []string{"int", "long"}}, "a.B.m(int, long)", "m(..)"},
		{"a.B.m( )", Signature{Class: "a.B", Name: "m", Params: []string{""}}, "a.B.m()", "m(..)"},
		// Java's split("\\s") keeps the empty word between two spaces.
		{"public  void a.B.m()", Signature{Modifiers: []string{"public", ""}, ReturnType: "void", Class: "a.B", Name: "m"}, "public  void a.B.m()", "m()"},
		{"a.B.m(", Signature{Class: "a.B", Name: "m"}, "a.B.m()", "m()"},
		{"", Signature{}, ".()", "()"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := ParseSignature(tc.in)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ParseSignature (-want +got):\n%s", d)
			}
			if s := got.String(); s != tc.str {
				t.Errorf("String() = %q, want %q", s, tc.str)
			}
			if s := got.Short(); s != tc.short {
				t.Errorf("Short() = %q, want %q", s, tc.short)
			}
		})
	}
}

func FuzzParseSignature(f *testing.F) {
	for _, s := range []string{"public void a.B.c(int, long)", "a.B", "(", ")", " ( ", "a b c d(e,,f)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig := ParseSignature(s)
		_ = sig.String()
		_ = sig.Short()
	})
}
