//go:build !race

package kdb

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
)

var arrayType = recordtest.ArrayType

func arrayRecords(n int) []record.Record { return recordtest.ArrayRecords(n, false) }

// TestBinaryArraysAllocs: array fields live in the batch's arena, so
// array-typed records decode without allocating per record (strings are
// interned).
func TestBinaryArraysAllocs(t *testing.T) {
	const n = 1000
	m, err := NewMapping(map[int32]*record.Type{7: arrayType})
	if err != nil {
		t.Fatal(err)
	}
	recs := arrayRecords(n)
	var data, text []byte
	for i := range recs {
		if data, err = AppendBinary(data, 7, &recs[i]); err != nil {
			t.Fatal(err)
		}
		if text, err = AppendText(text, 7, &recs[i]); err != nil {
			t.Fatal(err)
		}
		text = append(text, '\n')
	}
	d := NewDecoder(m, Options{})
	td := NewTextDecoder(m, Options{})
	var b record.Batch
	for name, decode := range map[string]func(){
		"binary": func() {
			b.Reset()
			d.Reset()
			if k, err := d.Decode(data, &b); err != nil || k != len(data) {
				t.Fatalf("%d, %v", k, err)
			}
		},
		"text": func() {
			b.Reset()
			if _, err := td.DecodeMessage(text, &b); err != nil {
				t.Fatal(err)
			}
		},
	} {
		recordtest.CheckDecodeAllocs(t, name, &b, recs, decode)
	}
}
