package gen

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitParts(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     templateParts
		err      bool
	}{
		{"none", "text only\n", templateParts{}, false},
		{"parts", "head\n/* gen:part a (comment) */\nA1\nA2\n# gen:part b\n\nB\n", templateParts{"a": "A1\nA2\n", "b": "\nB\n"}, false},
		{"stand-in", "# gen:part a\nA\n# gen:part -\nstub\n# gen:part b\nB", templateParts{"a": "A\n", "b": "B"}, false},
		{"empty part", "// gen:part a\n// gen:part b\nB\n", templateParts{"a": "", "b": "B\n"}, false},
		{"no name", "// gen:part \nx\n", nil, true},
		{"twice", "// gen:part a\n// gen:part a\n", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splitParts(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); !tc.err && diff != "" {
				t.Errorf("parts differ (-want +got):\n%s", diff)
			}
		})
	}
}
