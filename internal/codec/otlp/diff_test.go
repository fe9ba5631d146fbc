package otlp

import (
	"regexp"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracebridge/tracebridge/internal/record"
)

// decodeWith runs one decoder over msg, into batches of at most maxBatch
// spans.
func decodeWith(d *Decoder, msg []byte, json bool) (Result, error) {
	b := &record.Batch{}
	next := func() *record.Batch { return &record.Batch{} }
	if json {
		return d.DecodeJSON(msg, b, next)
	}
	return d.DecodeProto(msg, b, next)
}

// pdataRead is pdata's reading of msg (the reference decoder).
func pdataRead(msg []byte, json bool) (ptrace.Traces, error) {
	req := ptraceotlp.NewExportRequest()
	var err error
	if json {
		err = req.UnmarshalJSON(msg)
	} else {
		err = req.UnmarshalProto(msg)
	}
	return req.Traces(), err
}

// agree checks that the decoder reads msg as pdata does, field by field.
func agree(t *testing.T, d *Decoder, msg []byte, json bool) {
	t.Helper()
	td, err := pdataRead(msg, json)
	if err != nil {
		t.Fatalf("pdata: %v", err)
	}
	res, err := decodeWith(d, msg, json)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	wantRecs, wantRejected := want(td)
	if res.Rejected != wantRejected {
		t.Errorf("rejected %d spans (%s), want %d", res.Rejected, res.Reason, wantRejected)
	}
	if res.Spans != len(wantRecs) {
		t.Errorf("result says %d spans, want %d", res.Spans, len(wantRecs))
	}
	if d := diff(records(res.Batches), wantRecs); d != "" {
		t.Fatalf("records differ from pdata's reading (-pdata +decoder):\n%s", d)
	}
}

// TestAgreesWithPdata: for generated exports the decoder's records are
// what pdata reads, field by field, in protobuf and in JSON.
func TestAgreesWithPdata(t *testing.T) {
	for _, enc := range []string{"proto", "json"} {
		t.Run(enc, func(t *testing.T) {
			json := enc == "json"
			d := NewDecoder(Options{MaxBatch: 7})
			for seed := range uint64(300) {
				td := newGen(seed, json).traces(1 + int(seed%40))
				var msg []byte
				if json {
					msg = jsonOf(t, td)
				} else {
					msg = protoOf(t, td)
				}
				agree(t, d, msg, json)
			}
		})
	}
}

var camelKey = regexp.MustCompile(`"([a-z]+)([A-Z][A-Za-z]*)":`)

// snake turns pdata's lowerCamelCase JSON keys into snake_case, which
// OTLP/JSON receivers must accept too.
func snake(msg []byte) []byte {
	return camelKey.ReplaceAllFunc(msg, func(m []byte) []byte {
		var out []byte
		for _, c := range m {
			if c >= 'A' && c <= 'Z' {
				out = append(out, '_', c+'a'-'A')
				continue
			}
			out = append(out, c)
		}
		return out
	})
}

func TestJSONSnakeCase(t *testing.T) {
	d := NewDecoder(Options{})
	for seed := range uint64(50) {
		td := newGen(seed, true).traces(10)
		camel := jsonOf(t, td)
		s := snake(camel)
		if string(s) == string(camel) {
			t.Fatal("no keys renamed")
		}
		a, err := decodeWith(d, camel, true)
		if err != nil {
			t.Fatal(err)
		}
		want := records(a.Batches)
		b, err := decodeWith(d, s, true)
		if err != nil {
			t.Fatalf("snake_case: %v", err)
		}
		if df := diff(records(b.Batches), want); df != "" {
			t.Fatalf("snake_case reads differently (-camel +snake):\n%s", df)
		}
	}
}
