package kieker

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// TestNullStringsAsKiekerWritesThem: Kieker's logs have no null string; a
// null one (JFR's) is written as Kieker's ASCII writer writes null, an
// empty field, and in binary as the empty string, so both read back "".
func TestNullStringsAsKiekerWritesThem(t *testing.T) {
	typ := record.Builtin().Lookup(record.BeforeOperationEvent)
	var b record.Batch
	r := b.Add(typ, 7)
	r.Values[0] = record.IntValue(1)
	r.Values[1] = record.IntValue(2)
	r.Values[2] = record.IntValue(3)
	r.Values[3] = record.NullString()
	r.Values[4] = record.NullString()
	if got, want := string(AppendLine(nil, 0, r)), "$0;7;1;2;3;;\n"; got != want {
		t.Fatalf("ASCII line %q, want %q", got, want)
	}
	e := NewEncoder(EncoderOptions{})
	bin, err := e.Append(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	strs := NewStrings(0)
	for _, en := range e.NewEntries() {
		strs.Set(en.ID, en.Value)
	}
	var out record.Batch
	d := NewDecoder(Options{Strings: strs})
	if _, err := d.Decode(bin, &out); err != nil || out.Len() != 1 {
		t.Fatalf("binary: %d records, %v", out.Len(), err)
	}
	for _, i := range []int{3, 4} {
		if v := out.Records[0].Values[i]; v.Str() != "" || v.IsNull() {
			t.Fatalf("binary field %d reads back %+v", i, v)
		}
	}
}
