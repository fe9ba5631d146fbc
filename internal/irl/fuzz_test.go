package irl

import (
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkPositioned fails unless err is an *Error (or a list of them) with a
// plausible position in a source of n bytes.
func checkPositioned(t *testing.T, err error, n int) {
	t.Helper()
	var list ErrorList
	if errors.As(err, &list) {
		if len(list) == 0 {
			t.Fatal("empty ErrorList")
		}
		for _, e := range list {
			checkPositioned(t, e, n)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T without a position: %v", err, err)
	}
	if e.Pos.Line < 1 || e.Pos.Col < 1 || e.Pos.Offset < 0 || e.Pos.Offset > n || e.Msg == "" {
		t.Fatalf("bad position in %q", e)
	}
}

// FuzzParse parses arbitrary input. It must never panic; errors carry a
// position; a parsed file formats to text that parses to the same tree;
// resolving the file alone either succeeds and yields record types or
// fails with positioned errors.
func FuzzParse(f *testing.F) {
	for _, name := range corpusFiles(f) {
		src, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, s := range []string{
		"",
		"package p",
		"package p\nentity E",
		"package p\nimport q.*\nimport q.R\n@author 'a' @since \"b\"\nabstract entity A : T { const string C = 'c' string s = C }\nevent E extends A\ntemplate T { alias s as t string s }",
		"package p\ntemplate T : U{ long id }\ntemplate U : T",
		"package p\nentity A extends A",
		"package p\nentity A { grouped by A.y x grouped by A.x y }",
		"package p\nentity A { changeable grouped by A.id long copy long id transient auto-increment int n = 0 }",
		"package p\nentity A { int[3][] grid double d = -1.5e10f float f = 3f boolean b = false char c = '\\u0041' }",
		"package p\nentity A { string[] s = {'a', {\"b\"}, KIEKER_VERSION} long t : timestamp = 0 }",
		"package p /* unterminated",
		"package p\n@author 'unterminated",
		"package p\nentity ^entity { long ^const }",
		"package jdk\nentity `Outer$Inner` { long `eventThread.javaThreadId` string[] `frames.method` char ^long }",
		"/** doc */ package p\n/** d */ entity E { /** f */ long x }",
		"\uFEFFpackage p\r\nentity E\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse("f.irl", src)
		if err != nil {
			if file != nil {
				t.Fatal("a file and an error")
			}
			checkPositioned(t, err, len(src))
			return
		}
		out := Format(file)
		again, err := Parse("f.irl", out)
		if err != nil {
			t.Fatalf("formatted file does not parse: %v\n%s", err, out)
		}
		if diff := cmp.Diff(file, again, ignorePos); diff != "" {
			t.Fatalf("format round trip (-parsed +reparsed):\n%s\n%s", diff, out)
		}
		m, err := build([]*File{file})
		if err != nil {
			checkPositioned(t, err, len(src))
			return
		}
		if _, err := m.Types(); err != nil {
			checkPositioned(t, err, len(src))
		}
	})
}
