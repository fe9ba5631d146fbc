package jsonl

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

func TestAppendRecord(t *testing.T) {
	cat := record.Builtin()
	typ := cat.Lookup(record.BeforeOperationEvent)
	var b record.Batch
	r := b.Add(typ, -1)
	r.Values[0] = record.IntValue(1795312704163886691)
	r.Values[1] = record.IntValue(math.MinInt64)
	r.Values[2] = record.IntValue(0)
	r.Values[3] = record.StringValue("public long a.B.c(\"x\")\n\x01\xff")
	r.Values[4] = record.StringValue("a.B")
	got := string(AppendRecord(nil, r))
	want := `{"type":"kieker.common.record.flow.trace.operation.BeforeOperationEvent","loggingTimestamp":-1,"fields":{"timestamp":1795312704163886691,"traceId":-9223372036854775808,"orderIndex":0,"operationSignature":"public long a.B.c(\"x\")\n\u0001\ufffd","classSignature":"a.B"}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("not valid JSON")
	}
}

func TestSpecialValues(t *testing.T) {
	typ := record.MustType("t.T",
		record.Field{Name: "d", Kind: record.Double},
		record.Field{Name: "f", Kind: record.Float},
		record.Field{Name: "n", Kind: record.Double},
		record.Field{Name: "c", Kind: record.Char},
		record.Field{Name: "b", Kind: record.Bool},
		record.Field{Name: "a", Kind: record.String, Array: true},
		record.Field{Name: "e", Kind: record.Int, Array: true},
	)
	var b record.Batch
	r := b.Add(typ, 5)
	r.Values[0] = record.DoubleValue(math.Inf(-1))
	r.Values[1] = record.FloatValue(0.1)
	r.Values[2] = record.DoubleValue(math.NaN())
	r.Values[3] = record.IntValue('é')
	r.Values[4] = record.BoolValue(true)
	r.Values[5] = record.ListValue(record.String, []record.Value{record.StringValue("x"), record.StringValue("y")})
	got := string(AppendRecord(nil, r))
	want := `{"type":"t.T","loggingTimestamp":5,"fields":{"d":"-Infinity","f":0.1,"n":"NaN","c":"é","b":true,"a":["x","y"],"e":[]}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestNullStrings: a null string is JSON null, an empty one "", in fields
// and in arrays.
func TestNullStrings(t *testing.T) {
	typ := record.MustType("t.N",
		record.Field{Name: "null", Kind: record.String},
		record.Field{Name: "empty", Kind: record.String},
		record.Field{Name: "text", Kind: record.String},
		record.Field{Name: "a", Kind: record.String, Array: true},
	)
	var b record.Batch
	r := b.Add(typ, 1)
	r.Values[0] = record.NullString()
	r.Values[1] = record.StringValue("")
	r.Values[2] = record.StringValue("Grüße ✓")
	r.Values[3] = record.ListValue(record.String, []record.Value{record.NullString(), record.StringValue("")})
	got := string(AppendRecord(nil, r))
	want := `{"type":"t.N","loggingTimestamp":1,"fields":{"null":null,"empty":"","text":"Grüße ✓","a":[null,""]}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
