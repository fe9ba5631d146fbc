package split

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestComponent(t *testing.T) {
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "components.map")
	if err := os.WriteFile(mapFile, []byte("# layers\n\ncom\\.acme\\.db\\..* = persistence\ncom\\.acme\\.web\\..*=web\n  com\\.acme\\.Main = web\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		specs []string
		want  map[string]string // class → component
	}{
		{[]string{"package:2"}, map[string]string{
			"a.b.c.D": "a.b", "a.b.D": "a.b", "a.D": "a", "D": "", "a.b.c.D$Inner": "a.b", "": "",
		}},
		{[]string{"package:1"}, map[string]string{"a.b.c.D": "a", "x.Y": "x", "Y": ""}},
		{[]string{"package:9"}, map[string]string{"a.b.c.D": "a.b.c"}},
		{[]string{`regex:a\.b\..* .*Repo`}, map[string]string{
			"a.b.c.D": `a\.b\..*`, "x.UserRepo": ".*Repo", "a.bc.D": "", "a.b": "",
			"x.Repo.y": "", // patterns match whole names only
		}},
		{[]string{"map:" + mapFile}, map[string]string{
			"com.acme.db.Users": "persistence", "com.acme.web.Page": "web", "com.acme.Main": "web", "com.acme.Other": "",
		}},
		// The first spec that matches wins.
		{[]string{`regex:a\.b\.c\..*`, "package:1"}, map[string]string{"a.b.c.D": `a\.b\.c\..*`, "a.b.x.D": "a", "Top": ""}},
		{[]string{`regex:a\.b\.c\..*; package:1`}, map[string]string{"a.b.c.D": `a\.b\.c\..*`, "a.b.x.D": "a"}},
		{[]string{"package:1", `regex:a\.b\.c\..*`}, map[string]string{"a.b.c.D": "a"}},
	} {
		t.Run(strings.Join(tc.specs, "|"), func(t *testing.T) {
			b, err := Parse(tc.specs...)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for class := range tc.want {
				got[class] = b.Component(class)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("components (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	badLine := filepath.Join(dir, "bad-line.map")
	os.WriteFile(badLine, []byte("a\\..*=x\n# fine\nno equals sign\n"), 0o644)
	badRegex := filepath.Join(dir, "bad-regex.map")
	os.WriteFile(badRegex, []byte("ok=x\n(unclosed=y\n"), 0o644)
	empty := filepath.Join(dir, "empty.map")
	os.WriteFile(empty, []byte("# nothing\n"), 0o644)
	for _, tc := range []struct {
		spec    string
		is      error
		mention []string
	}{
		{"", ErrSpec, []string{"no boundary"}},
		{"package", ErrSpec, []string{`"package"`}},
		{"package:0", ErrSpec, []string{`"package:0"`, "positive"}},
		{"package:x", ErrSpec, []string{`"package:x"`}},
		{"regex:", ErrSpec, []string{"no pattern"}},
		{"regex:(a", ErrSpec, []string{`"regex:(a"`, `"(a"`}},
		{"class:1", ErrSpec, []string{"unknown kind"}},
		{"map:", ErrSpec, []string{"no file"}},
		{"map:" + filepath.Join(dir, "missing.map"), ErrMapFile, []string{"missing.map", "no such file"}},
		{"map:" + badLine, ErrMapFile, []string{"bad-line.map", "line 3", "pattern=component"}},
		{"map:" + badRegex, ErrMapFile, []string{"bad-regex.map", "line 2", `"(unclosed"`}},
		{"map:" + empty, ErrMapFile, []string{"empty.map", "no pattern=component"}},
		{"package:2;regex:[", ErrSpec, []string{`"regex:["`}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := Parse(tc.spec)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v is not %v", err, tc.is)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestClassOf(t *testing.T) {
	for _, tc := range []struct{ class, op, want string }{
		{"a.b.C", "ignored", "a.b.C"},
		{"", "public void kieker.examples.userguide.ch2bookstore.manual.Catalog.getBook(boolean)", "kieker.examples.userguide.ch2bookstore.manual.Catalog"},
		{"", "private static java.util.List a.b.C.lambda$x$5(int, int)", "a.b.C"},
		{"", "a.b.C.<init>()", "a.b.C"},
		{"", "main", ""},
		{"", "", ""},
		{"", "void f()", ""},
	} {
		if got := ClassOf(tc.class, tc.op); got != tc.want {
			t.Errorf("ClassOf(%q, %q) = %q, want %q", tc.class, tc.op, got, tc.want)
		}
	}
}

func TestResolverCache(t *testing.T) {
	r := newResolver(mustParse(t, "package:1"))
	a := r.event("x.A", "")
	if b := r.event(strings.Clone("x.A"), ""); a != b {
		t.Fatal("equal strings at different addresses resolve differently")
	}
	if r.event("y.A", "") == a {
		t.Fatal("different components resolve alike")
	}
	if r.event("", "void x.B.m()") != a {
		t.Fatal("class from the operation signature")
	}
	if n := testing.AllocsPerRun(100, func() { r.event("x.A", "") }); n != 0 {
		t.Fatalf("cached lookup allocates %v", n)
	}
}
