package benchkit

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFlags(t *testing.T) {
	known := func(s string) string {
		if s != "a" && s != "b" {
			return fmt.Sprintf("-list: unknown %q", s)
		}
		return ""
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // the list, when there is no error
		err  string
	}{
		{"default", nil, []string{"a", "b"}, ""},
		{"trimmed", []string{"-list", " b, ,a,b "}, []string{"b", "a", "b"}, ""},
		{"unknown", []string{"-list", "a,c", "-n", "0"}, nil, `-n 0: want 1 or more; -list: unknown "c"`},
		{"none", []string{"-list", ","}, nil, "-list: none given"},
		{"args", []string{"x"}, nil, `unexpected arguments ["x"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			fs := NewFlags("prog", "usage: prog [-list L]", &out)
			list := fs.String("list", "a,b", "a list")
			n := fs.Int("n", 1, "a number")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if *n < 1 {
				fs.Bad("-n %d: want 1 or more", *n)
			}
			got := fs.List("list", *list, known)
			err := fs.Err()
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("list (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil || err.Error() != tc.err {
				t.Fatalf("error %v, want %s", err, tc.err)
			}
			if want := "prog: " + tc.err + "\nusage: prog [-list L]\n"; !strings.HasPrefix(out.String(), want) {
				t.Errorf("output %q, want it to start with %q", out.String(), want)
			}
		})
	}
}

func TestFlagsHelp(t *testing.T) {
	var out strings.Builder
	fs := NewFlags("prog", "usage: prog", &out)
	if err := fs.Parse([]string{"-help"}); err != flag.ErrHelp {
		t.Fatalf("error %v, want flag.ErrHelp", err)
	}
	if !strings.HasPrefix(out.String(), "usage: prog\n") {
		t.Errorf("output %q", out.String())
	}
}
