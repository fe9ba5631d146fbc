package otlp

import (
	"errors"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// A hand-written OTLP/JSON export in the forms the specification allows
// besides pdata's own: enum names, integers as numbers, snake_case keys,
// upper-case hex, escapes, nulls and unknown members, spans before their
// resource.
const handJSON = `{
 "resource_spans": [{
  "scopeSpans": [{
   "spans": [{
     "traceId": "5B8EFFF798038103D269B633813FC60C",
     "span_id": "EEE19B7EC3C1B174",
     "parentSpanId": "",
     "name": "caf\u00e9 \ud83d\ude00 \"q\"",
     "kind": "SPAN_KIND_CLIENT",
     "startTimeUnixNano": 1544712660000000000,
     "end_time_unix_nano": "1544712661000000000",
     "attributes": [
       {"key": "i", "value": {"intValue": 42}},
       {"key": "s", "value": {"string_value": "x\/y"}},
       {"key": "d", "value": {"doubleValue": "NaN"}},
       {"key": "d2", "value": {"doubleValue": 2}},
       {"key": "b", "value": {"bytesValue": "AQI"}},
       {"key": "n", "value": null},
       {"key": "a", "value": {"arrayValue": {"values": [{"boolValue": true}, {}]}}}
     ],
     "status": {"code": "STATUS_CODE_ERROR", "message": null},
     "unknown": {"deep": [1, 2, {"x": null}]},
     "events": null,
     "flags": 257
   }],
   "scope": {"name": "lib", "version": "1"}
  }],
  "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]}
 }]
}`

func TestJSONForms(t *testing.T) {
	res, err := decodeWith(NewDecoder(Options{}), []byte(handJSON), true)
	if err != nil {
		t.Fatal(err)
	}
	recs := records(res.Batches)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	want := []string{
		`traceIdHigh="6597491943016726787"`, `traceIdLow="-3284894120862038516"`, `spanId="-1233533854170369676"`, `parentSpanId="0"`,
		`name="café 😀 \"q\""`, `service="svc"`, `hostname="svc"`,
		`startTimeUnixNano="1544712660000000000"`, `endTimeUnixNano="1544712661000000000"`, `kind="3"`, `statusCode="2"`, `statusMessage=""`,
		`scope="lib"`, `component=""`, `thread=""`, `process=""`,
		`attributes=["i" "42" "s" "x/y" "d" "NaN" "d2" "2" "b" "AQI=" "n" "" "a" "[true,null]"]`,
		`attributeTypes=["3" "1" "4" "4" "5" "1" "6"]`,
		`resource=["service.name" "svc" "otel.scope.version" "1"]`, `resourceTypes=["1" "0"]`, `events=[]`, `links=[]`, `traceState=""`, `flags="257"`,
	}
	if d := diffStrings(show(recs)[0], want); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestMalformedJSON(t *testing.T) {
	tests := []struct {
		name, msg string
		offset    int
		reason    string
	}{
		{"empty", ``, 0, "want an object"},
		{"array at the top", `[]`, 0, "want an object"},
		{"trailing data", `{} x`, 3, "data after"},
		{"unterminated", `{"resourceSpans": [`, 19, "want an object"},
		{"bad literal", `{"resourceSpans": tru}`, 18, "want an array"},
		{"bad escape", `{"a\q": 1}`, 3, `bad escape \q`},
		{"control character", "{\"a\x01\": 1}", 3, "control character"},
		{"missing colon", `{"a" 1}`, 5, "want :"},
		{"missing comma", `{"a": 1 "b": 2}`, 8, "want , or }"},
		{"bad number", `{"a": -}`, 6, "want a number"},
		{"time not an integer", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"1.5"}]}]}]}`, 64, `"1.5" is not an unsigned 64-bit integer`},
		{"negative time", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":-1}]}]}]}`, 64, "is not an unsigned"},
		{"unknown kind", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_NONE"}]}]}]}`, 51, `unknown name "SPAN_KIND_NONE"`},
		{"bool as string", `{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"boolValue":"true"}}]}}]}`, 77, "want true or false"},
		{"bad base64", `{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"bytesValue":"!!"}}]}}]}`, 78, "bytes_value"},
		{"deep", `{"x":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, 517, "nested deeper than 512"},
	}
	d := NewDecoder(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &record.Batch{}
			_, err := d.DecodeJSON([]byte(tt.msg), b, nil)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want an *Error wrapping ErrMalformed", err)
			}
			if !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("reason %q, want it to say %q", e.Reason, tt.reason)
			}
			if e.Offset != tt.offset {
				t.Errorf("offset %d, want %d (%v)", e.Offset, tt.offset, err)
			}
		})
	}
}

func TestJSONRejectedSpans(t *testing.T) {
	span := func(fields string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174"},` +
			`{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b175"` + fields + `}]}]}]}`
	}
	tests := []struct{ name, fields, reason string }{
		{"short trace id", `,"traceId":"5b8e"`, "trace id of 4 hex digits, want 32"},
		{"bad hex", `,"spanId":"zzzzzzzzzzzzzzzz"`, `span id "zzzzzzzzzzzzzzzz" is not hex`},
		{"zero span id", `,"spanId":"0000000000000000"`, "span id is missing or all zero"},
		{"link id", `,"links":[{"traceId":"00"}]`, "link at offset"},
		{"deep value", `,"attributes":[{"key":"k","value":{"arrayValue":{"values":[{"arrayValue":{"values":[{"arrayValue":{}}]}}]}}}]`, "nested deeper than 2"},
	}
	d := NewDecoder(Options{MaxDepth: 2})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := d.DecodeJSON([]byte(span(tt.fields)), &record.Batch{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Rejected != 1 || res.Spans != 1 {
				t.Fatalf("rejected %d, kept %d; want 1 and 1", res.Rejected, res.Spans)
			}
			if !strings.Contains(res.Reason, tt.reason) {
				t.Errorf("reason %q, want it to say %q", res.Reason, tt.reason)
			}
		})
	}
}

// TestJSONEmptyKey: a member named "" is a member like any other (pdata's
// reader takes it for the end of the object).
func TestJSONEmptyKey(t *testing.T) {
	msg := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"":[{"":null}],"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174"}]}]}]}`
	res, err := NewDecoder(Options{}).DecodeJSON([]byte(msg), &record.Batch{}, nil)
	if err != nil || res.Spans != 1 || res.Rejected != 0 {
		t.Fatalf("%d spans, %d rejected, %v; want the one span", res.Spans, res.Rejected, err)
	}
}
