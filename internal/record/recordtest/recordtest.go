// Package recordtest holds the record types and records the tests of
// several packages share: a field of every kind for codec round trips, a
// JFR execution sample, records with array fields for the allocation
// tests.
package recordtest

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// AllKinds returns a scalar and an array field of every kind, for a test
// type that exercises every encoding; tests append their own last field.
func AllKinds() []record.Field {
	return []record.Field{
		{Name: "b", Kind: record.Bool},
		{Name: "y", Kind: record.Byte},
		{Name: "s", Kind: record.Short},
		{Name: "c", Kind: record.Char},
		{Name: "i", Kind: record.Int},
		{Name: "l", Kind: record.Long},
		{Name: "f", Kind: record.Float},
		{Name: "d", Kind: record.Double},
		{Name: "str", Kind: record.String},
		{Name: "ba", Kind: record.Bool, Array: true},
		{Name: "ya", Kind: record.Byte, Array: true},
		{Name: "sa", Kind: record.Short, Array: true},
		{Name: "ca", Kind: record.Char, Array: true},
		{Name: "ia", Kind: record.Int, Array: true},
		{Name: "la", Kind: record.Long, Array: true},
		{Name: "fa", Kind: record.Float, Array: true},
		{Name: "da", Kind: record.Double, Array: true},
		{Name: "stra", Kind: record.String, Array: true},
	}
}

// ExecutionSample is jdk.ExecutionSample as internal/codec/jfr makes it:
// dotted field names, an array of frames (top first).
var ExecutionSample = record.MustType("jdk.ExecutionSample",
	record.Field{Name: "startTime", Kind: record.Long},
	record.Field{Name: "sampledThread", Kind: record.String},
	record.Field{Name: "sampledThread.javaThreadId", Kind: record.Long},
	record.Field{Name: "sampledThread.osThreadId", Kind: record.Long},
	record.Field{Name: "stackTrace", Kind: record.String, Array: true},
	record.Field{Name: "stackTrace.truncated", Kind: record.Bool},
	record.Field{Name: "state", Kind: record.String})

// AddSample adds to b an ExecutionSample of thread tid ("worker", OS
// thread tid+1000) at time ts, runnable, with the given frames (top
// first).
func AddSample(b *record.Batch, tid, ts int64, frames ...string) *record.Record {
	r := b.Add(ExecutionSample, ts)
	r.Values[0] = record.IntValue(ts)
	r.Values[1] = record.StringValue("worker")
	r.Values[2] = record.IntValue(tid)
	r.Values[3] = record.IntValue(tid + 1000)
	r.Values[4] = b.NewList(record.String, len(frames))
	for i, f := range frames {
		r.Values[4].List().Items[i] = record.StringValue(f)
	}
	r.Values[6] = record.StringValue("STATE_RUNNABLE")
	return r
}

// ArrayType has array fields of a numeric and of the string kind.
var ArrayType = record.MustType("test.ArrayRecord",
	record.Field{Name: "id", Kind: record.Long},
	record.Field{Name: "samples", Kind: record.Long, Array: true},
	record.Field{Name: "tags", Kind: record.String, Array: true})

// ArrayRecords returns n records of ArrayType, record i with id i and
// logging timestamp i, or record.NoTimestamp if not timestamped.
func ArrayRecords(n int, timestamped bool) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		ts := int64(record.NoTimestamp)
		if timestamped {
			ts = int64(i)
		}
		recs[i] = record.Record{Type: ArrayType, LoggingTimestamp: ts, Values: []record.Value{
			record.IntValue(int64(i)),
			record.ListValue(record.Long, []record.Value{record.IntValue(1), record.IntValue(int64(i)), record.IntValue(3)}),
			record.ListValue(record.String, []record.Value{record.StringValue("alpha"), record.StringValue("beta")}),
		}}
	}
	return recs
}

// CheckDecodeAllocs runs decode, which decodes recs into b (reset first),
// and fails t unless b then holds as many records as recs, the last one
// equal, and decode allocates less than 0.1 times a record.
func CheckDecodeAllocs(t testing.TB, name string, b *record.Batch, recs []record.Record, decode func()) {
	t.Helper()
	n := len(recs)
	decode()
	if b.Len() != n || !b.Records[n-1].Equal(&recs[n-1]) {
		t.Fatalf("%s: decoded %d records, last %v", name, b.Len(), b.Records[b.Len()-1].Values)
	}
	if per := testing.AllocsPerRun(20, decode) / float64(n); per >= 0.1 {
		t.Errorf("%s: %.3f allocations per record, want < 0.1", name, per)
	}
}

// Strings renders each of rs with str, for comparisons.
func Strings(rs []record.Record, str func(*record.Record) string) []string {
	out := make([]string, len(rs))
	for i := range rs {
		out[i] = str(&rs[i])
	}
	return out
}

// CountTypes counts records by short type name.
func CountTypes(rs []record.Record) map[string]int {
	m := map[string]int{}
	for i := range rs {
		m[rs[i].Type.ShortName()]++
	}
	return m
}
