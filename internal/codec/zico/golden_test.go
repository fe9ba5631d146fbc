package zico_test

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
)

// The byte examples of ZICO.md §5, written by zorka-common itself.
const (
	goldenHello = `EF E3 22 "com.jitlogic.zorka.HelloRequest_v1" 03 7B 8B CF E5 68 00 DC "h1" DC "pw"`

	goldenRecord = `01 02 03 02   72 16 E3 60   01 00`
	goldenTail   = `04 7B 8B CF E5 68 00 00 00   F7   C0 E6 05 50 C8   F7`

	goldenData1 = `EF E3 1C "com.jitlogic.zorka.Symbol_v1" 02  01 DB "C"
		A0 02 DB "m"   A0 03 DD "()V"   A0 05 E0 "STATUS"   A0 04 DE "HTTP"
		EF E3 21 "com.jitlogic.zorka.TraceRecord_v1" 0B ` + goldenRecord + `
		EF E3 21 "com.jitlogic.zorka.TraceMarker_v1" 04 ` + goldenTail

	goldenData2 = `EF E3 21 "com.jitlogic.zorka.TraceRecord_v1" 0B ` + goldenRecord + `
		EF E3 21 "com.jitlogic.zorka.TraceMarker_v1" 04 ` + goldenTail + `
		A0 ` + goldenRecord + ` A1 ` + goldenTail
)

var clock = time.UnixMilli(1700000000000)

// exampleRecord is the record of ZICO.md §5: C.m()V, 1.5 ms, an HTTP
// trace with STATUS 200.
func exampleRecord() *zico.TraceRecord {
	r := zicotest.Root(zicotest.Record("C", "m", "()V", 1500000), "HTTP", clock)
	r.Attrs = []zico.Attr{{Key: "STATUS", Value: zico.Value{Kind: zico.KindInt, Int: 200}}}
	return &r
}

// exampleRegistry numbers the names as the agent of §5 did.
func exampleRegistry() *zicotest.Registry {
	reg := zicotest.NewRegistry()
	for _, n := range []string{"C", "m", "()V", "HTTP", "STATUS"} {
		reg.ID(n)
	}
	return reg
}

func TestGoldenHello(t *testing.T) {
	got := zicotest.HelloPayload("h1", "pw", clock)
	if want := hx(t, goldenHello); !bytes.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", hex.Dump(got), hex.Dump(want))
	}
	var d = zico.NewDecoder(zico.Limits{})
	res := decode(d, got, nil)
	want := []any{zico.HelloRequest{Time: 1700000000000, Hostname: "h1", Auth: "pw"}}
	if res.Err != nil || !cmp.Equal(res.Objects, want) {
		t.Fatalf("decoded %v, %v", res.Objects, res.Err)
	}
}

func TestGoldenData(t *testing.T) {
	p := zicotest.NewPayload(exampleRegistry())
	first := p.Append(nil, exampleRecord())
	if want := hx(t, goldenData1); !bytes.Equal(first, want) {
		t.Fatalf("first packet:\n%s\nwant\n%s", hex.Dump(first), hex.Dump(want))
	}
	second := p.Append(nil, exampleRecord(), exampleRecord())
	if want := hx(t, goldenData2); !bytes.Equal(second, want) {
		t.Fatalf("second packet:\n%s\nwant\n%s", hex.Dump(second), hex.Dump(want))
	}

	// Decoding with the connection's symbols gives the names back.
	syms := zico.NewSymbolMap(0, 0)
	d := zico.NewDecoder(zico.Limits{})
	res := decode(d, first, syms)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	rec := zico.TraceRecord{
		ClassID: 1, MethodID: 2, SignatureID: 3, Class: "C", Method: "m", Signature: "()V",
		Flags: zico.FlagTraceBegin, Time: 1500000, Calls: 1,
		Marker: &zico.TraceMarker{TraceID: 4, TraceType: "HTTP", Clock: 1700000000000},
		Attrs:  []zico.Attr{{KeyID: 5, Key: "STATUS", Value: zico.Value{Kind: zico.KindInt, Int: 200}}},
	}
	want := []any{
		zico.Symbol{ID: 1, Name: "C"}, zico.Symbol{ID: 2, Name: "m"}, zico.Symbol{ID: 3, Name: "()V"},
		zico.Symbol{ID: 5, Name: "STATUS"}, zico.Symbol{ID: 4, Name: "HTTP"},
		zico.Trace{Root: &rec, Records: 1},
	}
	if diff := cmp.Diff(want, res.Objects); diff != "" {
		t.Fatalf("first packet (-want +got):\n%s", diff)
	}
	res = decode(d, second, syms)
	want = []any{zico.Trace{Root: &rec, Records: 1}, zico.Trace{Root: &rec, Records: 1}}
	if diff := cmp.Diff(want, res.Objects); res.Err != nil || diff != "" {
		t.Fatalf("second packet %v (-want +got):\n%s", res.Err, diff)
	}
	// Without the first packet's symbols, the ids stay unresolved.
	res = decode(d, second, zico.NewSymbolMap(0, 0))
	if tr := res.Objects[0].(zico.Trace); tr.Unresolved != 5 || tr.Root.Class != "" {
		t.Fatalf("unresolved: %+v", tr)
	}
}

func TestGoldenFrames(t *testing.T) {
	if got, want := zico.AppendFrame(nil, zico.OK, nil), hx(t, "21C0BABE 0000 00000000 0000000000000000"); !bytes.Equal(got, want) {
		t.Fatalf("OK reply % X", got)
	}
	got := zico.AppendFrame(nil, zico.Hello, []byte("abc"))
	// CRC-32 of "abc" is 0x352441C2.
	if want := hx(t, `21C0BABE 0010 00000003 00000000352441C2 "abc"`); !bytes.Equal(got, want) {
		t.Fatalf("HELLO frame % X", got)
	}
}
