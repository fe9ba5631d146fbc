//go:build !race

package kieker

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
)

// arrayType has array fields of a numeric and of the string kind.
var arrayType = recordtest.ArrayType

func arrayRecords(n int) []record.Record { return recordtest.ArrayRecords(n, true) }

func arrayCatalog(t *testing.T) *record.Catalog {
	cat := record.Builtin()
	if err := cat.Add(arrayType); err != nil {
		t.Fatal(err)
	}
	return cat
}

// TestDecodeArraysAllocs: array fields live in the batch's arena, so a
// binary stream of array-typed records decodes without allocating per
// record once the batch has grown.
func TestDecodeArraysAllocs(t *testing.T) {
	const n = 2000
	recs := arrayRecords(n)
	e := NewEncoder(EncoderOptions{})
	var data []byte
	for i := range recs {
		var err error
		if data, err = e.Append(data, &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	strs := NewStrings(0)
	for _, en := range e.NewEntries() {
		if err := strs.Set(en.ID, en.Value); err != nil {
			t.Fatal(err)
		}
	}
	d := NewDecoder(Options{Strings: strs, Catalog: arrayCatalog(t)})
	var b record.Batch
	decode := func() {
		b.Reset()
		if m, err := d.Decode(data, &b); err != nil || m != len(data) {
			t.Fatalf("%d %v", m, err)
		}
	}
	recordtest.CheckDecodeAllocs(t, "binary", &b, recs, decode)
}

// TestDecodeTextArraysAllocs: the same for .dat lines.
func TestDecodeTextArraysAllocs(t *testing.T) {
	const n = 2000
	recs := arrayRecords(n)
	var data []byte
	for i := range recs {
		data = AppendLine(data, 1, &recs[i])
	}
	strs := NewStrings(0)
	if err := strs.Set(1, arrayType.Name); err != nil {
		t.Fatal(err)
	}
	d := NewTextDecoder(TextOptions{Strings: strs, Catalog: arrayCatalog(t)})
	var b record.Batch
	decode := func() {
		b.Reset()
		if m, err := d.Decode(data, &b); err != nil || m != len(data) {
			t.Fatalf("%d %v", m, err)
		}
	}
	recordtest.CheckDecodeAllocs(t, "text", &b, recs, decode)
}
