package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// checkBodyTerms fails unless bodyTerms of body says what appendTerms of
// the decoded body says: the same terms in the same order, or an error
// exactly when decodeTrace fails.
func checkBodyTerms(t *testing.T, what string, body []byte, syms *symbols) {
	t.Helper()
	got, err := bodyTerms([]block.Term{{Key: "before"}}, body, syms)
	tr, derr := decodeTrace(body, syms)
	if (err != nil) != (derr != nil) {
		t.Fatalf("%s: bodyTerms error %v, decodeTrace error %v", what, err, derr)
	}
	if err != nil {
		if len(got) != 1 {
			t.Fatalf("%s: bodyTerms failed but left %d terms behind dst's", what, len(got)-1)
		}
		return
	}
	want := appendTerms([]block.Term{{Key: "before"}}, tr)
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("%s: terms (-appendTerms +bodyTerms):\n%s", what, d)
	}
}

// TestBodyTerms: the terms read straight from a body are those of the
// decoded trace, for bodies of every version (the golden blocks), traces
// with resources, scopes, events and links, and every truncation and
// damaged byte of them.
func TestBodyTerms(t *testing.T) {
	type sample struct {
		name string
		body []byte
		syms *symbols
	}
	var samples []sample
	for v := 1; v <= bodyVersion; v++ {
		path := filepath.Join("testdata", "body-v"+string(rune('0'+v))+".block")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h, raw, err := readBlock(bytes.NewReader(b), 0)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := parsePayload(raw, h.version)
		if err != nil {
			t.Fatal(err)
		}
		syms := newSymbols()
		for _, s := range pl.syms {
			syms.id(s)
		}
		for i, body := range pl.traces {
			samples = append(samples, sample{path + " trace " + string(rune('0'+i)), body, syms})
		}
	}
	syms := newSymbols()
	e := encoder{syms: syms}
	for i, tr := range []*trace.Trace{
		mkTrace(1, "h", 5, 100, 50, true),
		withResources(mkTrace(2, "h", 6, 200, 50, true), "prod"),
		withResources(mkTrace(3, "h", 1, 300, 5, false), "test"),
		goldenTraces(bodyVersion)[0],
	} {
		tr.Spans[0].Events = append(tr.Spans[0].Events, trace.Event{Name: "log", Attributes: []trace.Attr{{Key: "msg", Value: "not a term"}}})
		samples = append(samples, sample{"encoded trace " + string(rune('0'+i)), bytes.Clone(e.encodeTrace(tr)), syms})
	}
	for _, s := range samples {
		checkBodyTerms(t, s.name, s.body, s.syms)
		for n := range len(s.body) {
			checkBodyTerms(t, s.name+" truncated", s.body[:n], s.syms)
		}
		for i := range s.body {
			for _, x := range []byte{0xff, 0x01, 0x80} {
				b := bytes.Clone(s.body)
				b[i] ^= x
				checkBodyTerms(t, s.name+" damaged", b, s.syms)
			}
		}
	}
}
