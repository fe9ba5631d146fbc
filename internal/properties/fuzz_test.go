package properties

import (
	"strings"
	"testing"
)

// FuzzParse: no input crashes the parser, and every key it returns has a
// value and appears once in Keys.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"kieker.monitoring.name=BRIDGE\n",
		"a:b\n! comment\n# comment\nc d\n",
		"key = value \\\n  continued\n",
		"uni=\\u00e9\\t\\n\\r\\f\\x\n",
		"bad=\\u12\n",
		"trailing\\",
		"=\n:\n \n",
		"kieker.monitoring.writer.filesystem.FileWriter.customStoragePath=/tmp/x\r\nk2=v2\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse("fuzz.properties", strings.NewReader(s))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, k := range p.Keys {
			if seen[k] {
				t.Fatalf("key %q listed twice", k)
			}
			seen[k] = true
			if _, ok := p.Get(k); !ok {
				t.Fatalf("key %q listed without a value", k)
			}
		}
		if len(seen) != len(p.Values) {
			t.Fatalf("%d keys listed, %d values", len(seen), len(p.Values))
		}
	})
}
