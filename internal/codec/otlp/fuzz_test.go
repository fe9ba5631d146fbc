package otlp

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// The fuzz targets check that no input makes the decoders panic, that
// what they return is well-formed, and, differentially, that whenever
// pdata reads a message and the decoder does too, they agree field by
// field (the same comparison as TestAgreesWithPdata). Where they may
// disagree on accepting a message:
//
//   - pdata refuses a message with an id of the wrong length, or values
//     nested more than 100 deep; the decoder rejects those spans alone;
//   - the decoder refuses protobuf groups (wire types 3 and 4), which
//     pdata skips loosely;
//   - the decoder's JSON is strict where pdata's iterator is lenient;
//   - pdata's JSON reader ends an object at a member named "" (a JSON
//     text with one is not compared).
//
// A message the decoder refuses that pdata reads is a failure unless its
// reason is one of those.

func fuzzSeeds(f *testing.F, json bool) {
	for seed := range uint64(12) {
		td := newGen(seed, json).traces(1 + int(seed%5))
		if json {
			f.Add(jsonOf(f, td))
		} else {
			f.Add(protoOf(f, td))
		}
	}
	if json {
		f.Add([]byte(handJSON))
		f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00","spanId":""}]}]}]}`))
		f.Add([]byte(`{}`))
		return
	}
	f.Add(request(nil, okSpan()))
	f.Add(request(pbBytes(nil, 1, kvString("service.name", "s")), okSpan(pbBytes(nil, 9, kvString("k", "v")))))
	f.Add([]byte{})
}

// fuzzDecoder has limits as loose as pdata's, so the two can agree.
func fuzzDecoder() *Decoder { return NewDecoder(Options{MaxBatch: 3, MaxDepth: 1 << 20}) }

func fuzzOne(t *testing.T, msg []byte, json bool) {
	d := fuzzDecoder()
	res, err := decodeWith(d, msg, json)
	n := 0
	for _, b := range res.Batches {
		for i := range b.Records {
			r := &b.Records[i]
			n++
			if r.Type != trace.SpanType || len(r.Values) != len(trace.SpanType.Fields) {
				t.Fatalf("record of type %v with %d values", r.Type, len(r.Values))
			}
			for j, f := range r.Type.Fields {
				if f.Array && r.Values[j].List() == nil {
					t.Fatalf("array field %s without a list", f.Name)
				}
			}
		}
	}
	if err != nil {
		if n != 0 {
			t.Fatalf("error %v, yet %d records kept", err, n)
		}
		if e, ok := err.(*Error); !ok || e.Offset < 0 || e.Offset > len(msg) {
			t.Fatalf("error %v: not an *Error with an offset inside the %d bytes", err, len(msg))
		}
	} else if n != res.Spans {
		t.Fatalf("%d records, Result.Spans %d", n, res.Spans)
	}

	if json && emptyKey.Match(msg) {
		// pdata's JSON reader takes a member named "" for the end of its
		// object and reads on from there; it cannot serve as reference.
		return
	}
	td, perr := pdataRead(msg, json)
	switch {
	case perr != nil:
		return // pdata is stricter about ids and depth
	case err != nil:
		reason := err.(*Error).Reason
		if !json && (strings.Contains(reason, "wire type 3") || strings.Contains(reason, "wire type 4")) {
			return
		}
		if json && lenientJSON(reason) {
			return
		}
		t.Fatalf("pdata reads the message, the decoder does not: %v", err)
	}
	wantRecs, wantRejected := want(td)
	if res.Rejected != wantRejected {
		t.Fatalf("rejected %d spans (%s), pdata's reading %d", res.Rejected, res.Reason, wantRejected)
	}
	if d := diff(records(res.Batches), wantRecs); d != "" {
		t.Fatalf("records differ from pdata's reading (-pdata +decoder):\n%s", d)
	}
}

var emptyKey = regexp.MustCompile(`""\s*:`)

// lenientJSON reports whether a JSON error is one of the decoder's
// strictness where pdata's iterator lets the input pass.
func lenientJSON(reason string) bool {
	for _, s := range lenientReasons {
		if strings.Contains(reason, s) {
			return true
		}
	}
	return false
}

var lenientReasons = []string{
	// Syntax: pdata's iterator reads "}" as an empty request, skips
	// unknown members without checking them, and more.
	"control character", "bad escape", "\\u escape", "unterminated string",
	"data after the top-level value",
	"want a number", "want digits",
	"want a string", "want an object", "want an array", "want a value",
	"want a member name", "want :", "want , or",
	"nested deeper",
}

func FuzzDecodeProto(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, msg []byte) { fuzzOne(t, msg, false) })
}

func FuzzDecodeJSON(f *testing.F) {
	fuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, msg []byte) { fuzzOne(t, msg, true) })
}
