package record

import (
	"math"
	"testing"
)

func TestBuiltinCatalog(t *testing.T) {
	c := Builtin()
	if n := len(c.Types()); n != 68 {
		t.Fatalf("built-in catalogue has %d types, want Kieker 2.0's 68", n)
	}
	for _, tc := range []struct {
		name   string
		fields []string
	}{
		{CallOperationEvent, []string{"timestamp", "traceId", "orderIndex", "operationSignature", "classSignature", "calleeOperationSignature", "calleeClassSignature"}},
		{Prefix + "flow.trace.operation.object.CallOperationObjectEvent", []string{"timestamp", "traceId", "orderIndex", "operationSignature", "classSignature", "calleeOperationSignature", "calleeClassSignature", "objectId", "calleeObjectId"}},
		{Prefix + "flow.trace.Trace", []string{"traceId", "threadId", "sessionId", "hostname", "parentTraceId", "parentOrderId"}},
		{"kieker.tpmon.monitoringRecord.executions.KiekerExecutionRecord", []string{"operationSignature", "sessionId", "traceId", "tin", "tout", "hostname", "eoi", "ess"}},
	} {
		typ := c.Lookup(tc.name)
		if typ == nil {
			t.Fatalf("%s: not in catalogue", tc.name)
		}
		var got []string
		for _, f := range typ.Fields {
			got = append(got, f.Name)
		}
		if len(got) != len(tc.fields) {
			t.Fatalf("%s: fields %v, want %v", tc.name, got, tc.fields)
		}
		for i := range got {
			if got[i] != tc.fields[i] {
				t.Fatalf("%s: fields %v, want %v", tc.name, got, tc.fields)
			}
		}
	}
	if c.Lookup("no.such.Type") != nil {
		t.Fatal("unknown name resolved")
	}
}

func TestCatalogAdd(t *testing.T) {
	c := Builtin()
	same := MustType(TraceMetadata, c.Lookup(TraceMetadata).Fields...)
	if err := c.Add(same); err != nil {
		t.Fatalf("re-adding identical type: %v", err)
	}
	if err := c.Add(MustType(TraceMetadata, Field{Name: "x", Kind: Int})); err == nil {
		t.Fatal("conflicting type accepted")
	}
	custom := MustType("my.Record", Field{Name: "v", Kind: Double})
	if err := c.Add(custom); err != nil {
		t.Fatal(err)
	}
	if Builtin().Lookup("my.Record") != nil {
		t.Fatal("Add leaked into other catalogues")
	}
}

func TestNewTypeErrors(t *testing.T) {
	if _, err := NewType("a.B", Field{Name: "x", Kind: Int}, Field{Name: "x", Kind: Long}); err == nil {
		t.Fatal("duplicate field accepted")
	}
	if _, err := NewType("a.B", Field{Name: "x"}); err == nil {
		t.Fatal("field without kind accepted")
	}
	if _, err := NewType(""); err == nil {
		t.Fatal("empty name accepted")
	}
}

func TestValues(t *testing.T) {
	if v := IntValue(math.MinInt64); v.Int() != math.MinInt64 {
		t.Fatal("long")
	}
	nan := math.Float32frombits(0x7fc00001)
	if v := FloatValue(nan); math.Float32bits(v.Float()) != 0x7fc00001 {
		t.Fatal("float NaN payload lost")
	}
	if v := DoubleValue(math.Copysign(0, -1)); !math.Signbit(v.Double()) {
		t.Fatal("negative zero")
	}
	a := ListValue(String, []Value{StringValue("a"), StringValue("b")})
	b := ListValue(String, []Value{StringValue("a"), StringValue("b")})
	if !a.Equal(b) || a.Equal(ListValue(String, nil)) {
		t.Fatal("list equality")
	}
}

func TestBatchReuseDoesNotAllocate(t *testing.T) {
	typ := Builtin().Lookup(BeforeOperationEvent)
	var b Batch
	fill := func() {
		b.Reset()
		for i := 0; i < 1000; i++ {
			r := b.Add(typ, -1)
			r.Values[0] = IntValue(int64(i))
			r.Values[3] = StringValue("op")
		}
	}
	fill()
	if n := testing.AllocsPerRun(10, fill); n != 0 {
		t.Fatalf("refilling a batch allocates %v times", n)
	}
	if got := b.Records[999].Values[0].Int(); got != 999 {
		t.Fatalf("record 999 has %d", got)
	}
	b.Truncate(10)
	if b.Len() != 10 {
		t.Fatal("truncate")
	}
}

func TestBatchValuesStableAcrossGrowth(t *testing.T) {
	typ := Builtin().Lookup(BeforeOperationEvent)
	var b Batch
	for i := 0; i < 5000; i++ {
		b.Add(typ, int64(i)).Values[2] = IntValue(int64(i))
	}
	for i, r := range b.Records {
		if r.Values[2].Int() != int64(i) || r.LoggingTimestamp != int64(i) {
			t.Fatalf("record %d corrupted after arena growth", i)
		}
	}
}

func TestInterner(t *testing.T) {
	var in Interner
	buf := []byte("operation")
	s1 := in.Bytes(buf)
	buf[0] = 'X'
	s2 := in.Bytes([]byte("operation"))
	if s1 != "operation" || s2 != "operation" {
		t.Fatal("interned string aliases its input")
	}
	if n := testing.AllocsPerRun(100, func() { in.Bytes([]byte("operation")) }); n != 0 {
		t.Fatalf("repeated string allocates %v", n)
	}
}

// TestBatchBytes: Bytes counts every value carved out since the last
// Reset (in all arenas the batch grew through, array items included),
// the records and the lists; Reset brings it back to 0 while the batch
// keeps its memory.
func TestBatchBytes(t *testing.T) {
	typ := Builtin().Lookup(BeforeOperationEvent)
	var b Batch
	if b.Bytes() != 0 {
		t.Fatalf("empty batch: %d bytes", b.Bytes())
	}
	const n = 5000 // past several arena growths
	for i := range n {
		b.Add(typ, int64(i))
	}
	fields := len(typ.Fields)
	want := n*fields*valueBytes + n*recordBytes
	if got := b.Bytes(); got != want {
		t.Fatalf("%d records of %d fields: %d bytes, want %d", n, fields, got, want)
	}
	b.NewList(Long, 100)
	if got, want := b.Bytes(), want+100*valueBytes+listBytes; got != want {
		t.Fatalf("with a list of 100 items: %d bytes, want %d", got, want)
	}
	b.Reset()
	if b.Bytes() != 0 || cap(b.arena) == 0 {
		t.Fatalf("after Reset: %d bytes, arena of %d kept", b.Bytes(), cap(b.arena))
	}
}
