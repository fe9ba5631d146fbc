package eql

import (
	"os"
	"strings"
	"testing"
)

// TestQueryDoc parses the examples of docs/QUERY.md: the three at the
// start of the EQL section (one a line) and each paragraph of the
// Examples block.
func TestQueryDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/QUERY.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	eql := doc[strings.Index(doc, "## EQL"):]
	block := func(s string) string {
		i := strings.Index(s, "```\n")
		j := strings.Index(s[i+4:], "```")
		return s[i+4 : i+4+j]
	}
	examples := strings.Split(strings.TrimSpace(block(eql)), "\n")
	ex := eql[strings.Index(eql, "### Examples"):]
	examples = append(examples, strings.Split(block(ex), "\n\n")...)
	if len(examples) < 10 {
		t.Fatalf("found %d examples", len(examples))
	}
	for _, q := range examples {
		if _, err := Parse(q); err != nil {
			t.Errorf("%q: %v", q, err)
		}
	}
	if _, err := Parse(`time > 500ms and (class ~= "Dao"))`); err == nil || err.Error() != `eql: column 34: unexpected ")"` {
		t.Errorf("the documented error is %v", err)
	}
}
