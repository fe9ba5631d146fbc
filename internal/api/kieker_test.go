package api

import (
	"strings"
	"testing"
	"time"
)

// TestEquivalenceClasses: the shop traces have two shapes (svc-1 serves
// op1 or op2 in turn), so Kieker's equivalence puts 20 traces into two
// classes of 10; the deployment equivalence agrees (one host per
// service); the deepest call is root → client → svc-1 → client → server.
func TestEquivalenceClasses(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	e := newEnv(t, nil, shop(20, base)...)
	for _, mode := range []string{"assembly", "deployment"} {
		var res EquivalenceResult
		e.get("/api/v1/analysis/equivalence?mode="+mode, &res)
		if res.Mode != mode || len(res.Classes) != 2 || res.Summary.Messages != 20 {
			t.Fatalf("%s: %+v", mode, res)
		}
		for _, c := range res.Classes {
			if c.Cardinality != 10 || c.Executions != 12 || c.MaxStackDepth != 4 {
				t.Errorf("%s: class %+v", mode, c)
			}
		}
	}
}

// TestSequenceDiagram: a shop trace's diagram has a lifeline per service
// component and a call and a reply per span; svg and pic draw it.
func TestSequenceDiagram(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	traces := shop(2, base)
	e := newEnv(t, nil, traces...)
	id := traces[0].ID.Hex()
	var res SequenceResult
	e.get("/api/v1/traces/"+id+"/sequence?mode=deployment", &res)
	if len(res.Diagrams) != 1 || len(res.Invalid) != 0 {
		t.Fatalf("%+v", res)
	}
	d := res.Diagrams[0]
	calls, replies := 0, 0
	for _, m := range d.Messages {
		switch m.Kind {
		case "call":
			calls++
		case "reply":
			replies++
		}
	}
	if calls != 12 || replies != 12 || d.Messages[0].From != 0 || d.Messages[0].Label != "GET /api/orders/{id}()" {
		t.Errorf("messages: %d calls, %d replies, first %+v", calls, replies, d.Messages[0])
	}
	if len(d.Participants) != 6 || !d.Participants[0].Actor || d.Participants[1].Container != "svc-0" {
		t.Errorf("participants %+v", d.Participants)
	}
	code, b, hdr := e.do("GET", "/api/v1/traces/"+id+"/sequence?format=svg", "")
	if code != 200 || hdr.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(string(b), "<svg ") {
		t.Errorf("svg: %d %s %.100s", code, hdr.Get("Content-Type"), b)
	}
	code, b, _ = e.do("GET", "/api/v1/traces/"+id+"/sequence?format=pic&index=0", "")
	if code != 200 || !strings.HasPrefix(string(b), ".PS\ncopy \"sequence.pic\";\n") {
		t.Errorf("pic: %d %.100s", code, b)
	}
	if code, _, _ := e.do("GET", "/api/v1/traces/"+id+"/sequence?format=svg&index=1", ""); code != 404 {
		t.Errorf("diagram 1 of 1: %d, want 404", code)
	}
}
