package trace

import (
	"encoding/json"
	"strconv"
	"testing"
)

// TestAttrJSONSafeInts: an int attribute reaches a JSON reader that
// reads numbers as doubles (JavaScript) exactly: within ±(2^53−1) as a
// number, beyond as a string of its digits, at every magnitude; the
// span record's form (AttrsJSON) keeps every int a number, and
// ParseAttrsJSON reads it back as the same int.
func TestAttrJSONSafeInts(t *testing.T) {
	for _, v := range []int64{0, 1, -1, MaxSafeInt, -MaxSafeInt, MaxSafeInt + 1, -MaxSafeInt - 1, 4658150164341456896, 1<<63 - 1, -1 << 63} {
		s := strconv.FormatInt(v, 10)
		a := Attr{Key: "k", Value: s, Type: TypeInt}
		got := string(AttrJSON(a))
		want := s
		if v > MaxSafeInt || v < -MaxSafeInt {
			want = strconv.Quote(s)
		}
		if got != want {
			t.Errorf("AttrJSON(%d) = %s, want %s", v, got, want)
		}
		// A double holds what AttrJSON sends as a number exactly.
		var f any
		if err := json.Unmarshal([]byte(got), &f); err != nil {
			t.Fatal(err)
		}
		if x, ok := f.(float64); ok && strconv.FormatFloat(x, 'f', -1, 64) != s {
			t.Errorf("AttrJSON(%d) = %s reads as %v", v, got, x)
		}
		stored := AttrsJSON([]Attr{a})
		if stored != `{"k":`+s+`}` {
			t.Errorf("AttrsJSON(%d) = %s, want the number", v, stored)
		}
		if back := ParseAttrsJSON(stored); len(back) != 1 || back[0] != a {
			t.Errorf("ParseAttrsJSON(%s) = %+v, want %+v", stored, back, a)
		}
	}
}

// TestAppendJSONSafeInts: the trace JSON (traces --json, the API's
// trace) shows a Kieker traceId above 2^53 and big int attributes of
// spans and events as strings.
func TestAppendJSONSafeInts(t *testing.T) {
	const kid = 4658150164341456896
	big := Attr{Key: "big", Value: "9007199254740993", Type: TypeInt}
	tr := &Trace{ID: KiekerID(kid), Spans: []Span{{SpanID: 1, Source: FromEvents, KiekerTrace: kid, Parent: -1, Attributes: []Attr{big},
		Events: []Event{{Name: "e", Attributes: []Attr{big}}}}}}
	var got struct {
		TraceID string `json:"traceId"`
		Spans   []struct {
			Attributes map[string]any `json:"attributes"`
			Events     []struct {
				Attributes map[string]any `json:"attributes"`
			} `json:"events"`
		} `json:"spans"`
	}
	if err := json.Unmarshal(AppendJSON(nil, tr), &got); err != nil {
		t.Fatal(err)
	}
	s := got.Spans[0]
	if got.TraceID != "4658150164341456896" || s.Attributes["kieker.traceId"] != "4658150164341456896" ||
		s.Attributes["big"] != "9007199254740993" || s.Events[0].Attributes["big"] != "9007199254740993" {
		t.Errorf("AppendJSON: %s", AppendJSON(nil, tr))
	}
}
