package trace

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// slowAttrsJSON is ParseAttrsJSON through encoding/json only.
func slowAttrsJSON(s string) []Attr {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil
	}
	out := make([]Attr, 0, len(m))
	for k, raw := range m {
		out = append(out, attrFromJSON(k, raw))
	}
	sortAttrs(out)
	return out
}

func sortAttrs(as []Attr) {
	for i := 1; i < len(as); i++ {
		for j := i; j > 0 && as[j].Key < as[j-1].Key; j-- {
			as[j], as[j-1] = as[j-1], as[j]
		}
	}
}

// TestFlatAttrsJSON: the fast path reads what encoding/json reads, or
// leaves the input to it.
func TestFlatAttrsJSON(t *testing.T) {
	for _, s := range []string{
		`{"a":"x","b":1,"c":true,"d":1.5,"e":-2e3,"f":false}`, `{"k":"v"}`, `{"k":""}`, `{"":"v"}`,
		`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":[1,2]}`, `{"a":{"b":1}}`, `{"a":"x\"y"}`, `{"a":01}`, `{"a":1.}`, `{"a":-}`,
		`{"a":nul}`, `{"a":null}`, `{"a":1,}`, `{"a" :1}`, `{"a":1 }`, `{a:1}`, `{"a":"é"}`, "{\"a\":\"\x01\"}", `{"a":"x"`, `{"a":"x}`,
		`{"a":12345678901234567890}`, `{"a":1e400}`, `{"a":"x","b"}`, `{"a":"x",}`, `{}`, `{"a":tru}`, `{"a":"x"}x}`,
	} {
		want := slowAttrsJSON(s)
		if got := ParseAttrsJSON(s); !cmp.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: %v, encoding/json reads %v", s, got, want)
		}
	}
	all := []Attr{{Key: "a", Value: "x", Type: TypeString}, {Key: "b", Value: "42", Type: TypeInt}, {Key: "c", Value: "true", Type: TypeBool},
		{Key: "d", Value: "0.25", Type: TypeDouble}, {Key: "e", Value: "<&>", Type: TypeString}}
	if got := ParseAttrsJSON(AttrsJSON(all)); !cmp.Equal(got, all) {
		t.Errorf("round trip: %v", got)
	}
	// Appended after attributes already there (an Unpacker's arena): a
	// key is in order against the new object's keys only, and what the
	// fast path leaves to encoding/json leaves dst as it was.
	dst := []Attr{{Key: "z", Value: "1", Type: TypeInt}}
	for _, s := range []string{`{"a":"x","b":1}`, `{"b":1,"a":2}`, `{"a":[1,2]}`, `{}`, ``} {
		got := appendAttrsJSON(dst[:1:1], s)
		if want := append(dst[:1:1], slowAttrsJSON(s)...); !cmp.Equal(got, want) {
			t.Errorf("appended %s: %v, want %v", s, got, want)
		}
		if out, ok := appendFlatAttrsJSON(dst[:1:1], s); !ok && len(out) != 1 {
			t.Errorf("%s, not read: %d attributes, want dst's 1", s, len(out))
		}
	}
}
