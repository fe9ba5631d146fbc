package timeunit

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

func TestApply(t *testing.T) {
	cat := record.Builtin()
	c, err := New("us", cat)
	if err != nil {
		t.Fatal(err)
	}
	var b record.Batch
	before := b.Add(cat.Lookup(record.BeforeOperationEvent), record.NoTimestamp)
	before.Values[0] = record.IntValue(1_700_000_000_000_000)
	before.Values[1] = record.IntValue(77) // traceId is not a time
	oer := b.Add(cat.Lookup(record.OperationExecutionRecord), 5)
	oer.Values[3] = record.IntValue(10)
	oer.Values[4] = record.IntValue(20)
	c.Apply(&b, 0)
	r := b.Records
	if r[0].Values[0].Int() != 1_700_000_000_000_000_000 || r[0].Values[1].Int() != 77 || r[0].LoggingTimestamp != -1 {
		t.Errorf("before event: %v %v %v", r[0].Values[0].Int(), r[0].Values[1].Int(), r[0].LoggingTimestamp)
	}
	if r[1].Values[3].Int() != 10_000 || r[1].Values[4].Int() != 20_000 || r[1].LoggingTimestamp != 5_000 {
		t.Errorf("OER tin/tout/logging %v %v %v", r[1].Values[3].Int(), r[1].Values[4].Int(), r[1].LoggingTimestamp)
	}
	if n, _ := New("ns", cat); n != nil {
		t.Error("ns converter not nil")
	}
	if _, err := New("weeks", cat); err == nil {
		t.Error("bad unit accepted")
	}
}
