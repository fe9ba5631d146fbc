package kdb

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
)

// names returns id → canonical type name.
func names(m *Mapping) map[int32]string {
	out := map[int32]string{}
	for _, id := range m.IDs() {
		out[id] = m.Type(id).Name
	}
	return out
}

func TestParseMapping(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       map[int32]string
	}{
		{"perl", perlMappingText, map[int32]string{
			1: record.BeforeOperationEvent, 2: record.AfterOperationEvent, 3: record.TraceMetadata}},
		{"crlf, spaces, comments, blank lines, BOM",
			"\xef\xbb\xbf# comment\r\n\r\n  10 = kieker.common.record.controlflow.OperationExecutionRecord \r\n\t# indented comment\n7=kieker.common.record.CPUUtilizationRecord",
			map[int32]string{10: record.OperationExecutionRecord, 7: record.CPUUtilizationRecord}},
		{"negative, large and shared ids",
			"-5=kieker.common.record.misc.EmptyRecord\n2147483647=kieker.common.record.misc.EmptyRecord\n+4=kieker.tpmon.monitoringRecord.executions.KiekerExecutionRecord",
			map[int32]string{-5: record.Prefix + "misc.EmptyRecord", 2147483647: record.Prefix + "misc.EmptyRecord", 4: record.OperationExecutionRecord}},
		{"empty", "\n# nothing\n", map[int32]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMapping("test.map", strings.NewReader(tc.text), record.Builtin())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, names(m)); diff != "" {
				t.Fatalf("mapping (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMappingErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"not a number", "1=kieker.common.record.misc.EmptyRecord\nx=kieker.common.record.misc.EmptyRecord",
			`mapping test.map: line 2: id "x" is not a number`},
		{"dollar", "$1=kieker.common.record.misc.EmptyRecord", `mapping test.map: line 1: id "$1" is not a number`},
		{"out of range", "4294967296=kieker.common.record.misc.EmptyRecord",
			"mapping test.map: line 1: id 4294967296 is out of the int32 range"},
		{"duplicate", "# c\n3=kieker.common.record.misc.EmptyRecord\n3=kieker.common.record.misc.TimestampRecord",
			"mapping test.map: line 3: duplicate id 3 (first defined on line 2)"},
		{"unknown class", "1=x.Y", "mapping test.map: line 1: unknown record class x.Y"},
		{"no equals", "\n\n1 kieker.common.record.misc.EmptyRecord", "mapping test.map: line 3: no '=' between id and record class"},
		{"no class", "1=  ", "mapping test.map: line 1: id 1 has no record class"},
		{"line too long", "1=" + strings.Repeat("x", maxMappingLine), "mapping test.map: line 1: longer than 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMapping("test.map", strings.NewReader(tc.text), record.Builtin())
			if errString(err) != tc.want {
				t.Fatalf("error %q, want %q", errString(err), tc.want)
			}
		})
	}
}

func TestDefaultMapping(t *testing.T) {
	m, err := DefaultMapping(record.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]string{
		1:  record.BeforeOperationEvent,
		2:  record.AfterOperationEvent,
		3:  record.TraceMetadata,
		4:  record.AfterOperationFailedEvent,
		5:  record.CallOperationEvent,
		6:  record.ApplicationTraceMetadata,
		7:  record.OperationExecutionRecord,
		8:  record.SplitEvent,
		9:  record.JoinEvent,
		10: record.CPUUtilizationRecord,
		11: record.Prefix + "system.MemSwapUsageRecord",
		12: record.Prefix + "system.LoadAverageRecord",
		13: record.KiekerMetadataRecord,
		14: record.Prefix + "flow.thread.BeforeThreadBasedEvent",
		15: record.Prefix + "flow.thread.AfterThreadBasedEvent",
		16: record.Prefix + "flow.thread.AfterFailedThreadBasedEvent",
	}
	if diff := cmp.Diff(want, names(m)); diff != "" {
		t.Fatalf("default mapping (-want +got):\n%s", diff)
	}
	perl := perlMapping(t)
	for id := int32(1); id <= 3; id++ {
		if m.Type(id) != perl.Type(id) {
			t.Fatalf("id %d: default %s, Perl probes %s", id, m.Type(id).Name, perl.Type(id).Name)
		}
	}
	if _, err := DefaultMapping(record.NewCatalog()); err == nil {
		t.Fatal("default mapping from an empty catalogue")
	}
}

func TestMappingLookups(t *testing.T) {
	cat := record.Builtin()
	before, after := cat.Lookup(record.BeforeOperationEvent), cat.Lookup(record.AfterOperationEvent)
	for _, tc := range []struct {
		name  string
		types map[int32]*record.Type
	}{
		{"dense", map[int32]*record.Type{1: before, 2: after, 3: before}},
		{"sparse", map[int32]*record.Type{1_000_000: before, -2: after, 5_000_000: before}},
		{"mixed", map[int32]*record.Type{0: before, 3: after, 9000: before}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMapping(tc.types)
			if err != nil {
				t.Fatal(err)
			}
			lowest := map[*record.Type]int32{}
			for id, typ := range tc.types {
				if got := m.Type(id); got != typ {
					t.Fatalf("Type(%d) = %v", id, got)
				}
				if l, ok := lowest[typ]; !ok || id < l {
					lowest[typ] = id
				}
			}
			for typ, id := range lowest {
				if got, ok := m.ID(typ); !ok || got != id {
					t.Fatalf("ID(%s) = %d, %v; want %d", typ.ShortName(), got, ok, id)
				}
				// A type of the same name from another catalogue resolves too.
				if got, ok := m.ID(record.MustType(typ.Name, typ.Fields...)); !ok || got != id {
					t.Fatalf("ID by name (%s) = %d, %v; want %d", typ.ShortName(), got, ok, id)
				}
			}
			for _, id := range []int32{-1, 4, 1 << 30, -1 << 31} {
				if _, ok := tc.types[id]; !ok && m.Type(id) != nil {
					t.Fatalf("Type(%d) of an unmapped id", id)
				}
			}
			if _, ok := m.ID(cat.Lookup(record.TraceMetadata)); ok {
				t.Fatal("ID of an unmapped type")
			}
		})
	}
	if _, err := NewMapping(map[int32]*record.Type{1: nil}); err == nil {
		t.Fatal("nil type accepted")
	}
}

func TestMappingWriteTo(t *testing.T) {
	for _, m := range []*Mapping{perlMapping(t), allTypesMappingBuiltin(t)} {
		var buf bytes.Buffer
		n, err := m.WriteTo(&buf)
		if err != nil || n != int64(buf.Len()) {
			t.Fatalf("WriteTo: %d, %v (wrote %d)", n, err, buf.Len())
		}
		again, err := ParseMapping("written", &buf, record.Builtin())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(names(m), names(again)); diff != "" {
			t.Fatalf("written mapping (-want +got):\n%s", diff)
		}
	}
	var buf bytes.Buffer
	if _, err := perlMapping(t).WriteTo(&buf); err != nil || !strings.Contains(buf.String(), "3=kieker.common.record.flow.trace.Trace\n") {
		t.Fatalf("legacy name not kept as written:\n%s", buf.String())
	}
}

// allTypesMappingBuiltin is allTypesMapping without the test-only type.
func allTypesMappingBuiltin(tb testing.TB) *Mapping { return builtinMapping(tb, nil) }

func FuzzMapping(f *testing.F) {
	f.Add([]byte(perlMappingText))
	f.Add([]byte("1=kieker.common.record.misc.EmptyRecord\r\n# x\r\n\r\n -7 = kieker.common.record.flow.trace.Trace"))
	f.Add([]byte("1=a\n1=b"))
	f.Add([]byte("99999999999=kieker.common.record.misc.EmptyRecord"))
	var all bytes.Buffer
	if _, err := allTypesMappingBuiltin(f).WriteTo(&all); err != nil {
		f.Fatal(err)
	}
	f.Add(all.Bytes())
	cat := record.Builtin()
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMapping("fuzz", bytes.NewReader(data), cat)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "mapping fuzz: line ") {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := ParseMapping("again", &buf, cat)
		if err != nil {
			t.Fatalf("written mapping does not parse: %v\n%s", err, buf.String())
		}
		if diff := cmp.Diff(names(m), names(again)); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
		for _, id := range m.IDs() {
			low, ok := m.ID(m.Type(id))
			if !ok || low > id || m.Type(low) != m.Type(id) {
				t.Fatalf("ID(Type(%d)) = %d, %v", id, low, ok)
			}
		}
	})
}
