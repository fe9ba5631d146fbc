package store

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/trace"
)

var update = flag.Bool("update", false, "rewrite the golden block of the current trace body version")

// goldenTraces are the traces of the golden blocks: every field of the
// trace body set, and, from version 2 on, resources and scopes.
func goldenTraces(version int) []*trace.Trace {
	attrs := []trace.Attr{
		{Key: "s", Value: "text ü", Type: trace.TypeString}, {Key: "b", Value: "true", Type: trace.TypeBool},
		{Key: "i", Value: "-4658150164341456896", Type: trace.TypeInt}, {Key: "d", Value: "0.5", Type: trace.TypeDouble},
		{Key: "raw", Value: "/wA=", Type: trace.TypeBytes}, {Key: "j", Value: `{"a":[1,2]}`, Type: trace.TypeJSON},
	}
	otel := &trace.Trace{ID: trace.ID{Hi: 0x0102030405060708, Lo: 0x090a0b0c0d0e0f10}, Broken: []string{"span 0000000000000009 (orphan): parent 0000000000000063 missing"}}
	otel.Spans = []trace.Span{
		{SpanID: 1, Parent: -1, Operation: "GET /cart", Component: "io.opentelemetry.http", Host: "node-1", Service: "shop",
			Thread: "12", Process: "4711", Start: 1_700_000_000_000_000_000, End: 1_700_000_000_005_000_000, Kind: trace.KindServer,
			Status: trace.StatusOK, Attributes: attrs, OrderIndex: -1, EOI: -1, ESS: -1, Source: trace.FromSpan,
			Links: []trace.Link{{TraceID: trace.ID{Hi: 1, Lo: 2}, SpanID: 3, Kind: trace.LinkFollowsFrom, TraceState: "a=1", Attributes: attrs[:1]}}},
		{SpanID: 2, ParentID: 1, Parent: 0, Depth: 1, Operation: "SELECT", Component: "db", Host: "db-1", Service: "db",
			Start: 1_700_000_000_001_000_000, End: 1_700_000_000_002_000_000, Kind: trace.KindClient, Status: trace.StatusError, Error: true,
			StatusMessage: "timeout", OrderIndex: -1, EOI: -1, ESS: -1, Source: trace.FromSpan,
			Events: []trace.Event{{Name: "exception", Time: 1_700_000_000_001_500_000, Attributes: []trace.Attr{{Key: "exception.type", Value: "IOError", Type: trace.TypeString}}}}},
		{SpanID: 9, ParentID: 99, Parent: -1, Operation: "orphan", Host: "node-1", Service: "shop",
			Start: 1_700_000_000_003_000_000, End: 1_700_000_000_004_000_000, OrderIndex: -1, EOI: -1, ESS: -1, Source: trace.FromSpan},
	}
	kieker := &trace.Trace{ID: trace.KiekerID(4658150164341456896), Part: 2}
	kieker.Spans = []trace.Span{
		{SpanID: 77, Parent: -1, Operation: "public void shop.Cart.add(int)", Component: "shop.Cart", Host: "srv", Service: "srv",
			Thread: "main", Session: "sess-1", Start: 5, End: 50, OrderIndex: 0, EOI: 0, ESS: 0, KiekerTrace: 4658150164341456896, Source: trace.FromEvents},
		{SpanID: 78, ParentID: 77, Parent: 0, Depth: 1, Operation: "private int shop.Cart.price()", Component: "shop.Cart", Host: "srv", Service: "srv",
			Thread: "main", Session: "sess-1", Start: 10, End: 20, OrderIndex: 1, EOI: 1, ESS: 1, KiekerTrace: 4658150164341456897, Source: trace.FromEvents},
	}
	if version >= 2 {
		shop := &trace.Resource{Attributes: []trace.Attr{{Key: "service.name", Value: "shop", Type: trace.TypeString},
			{Key: "deployment.environment", Value: "prod", Type: trace.TypeString}, {Key: "process.pid", Value: "4711", Type: trace.TypeInt}}}
		db := &trace.Resource{Attributes: []trace.Attr{{Key: "service.name", Value: "db", Type: trace.TypeString}}}
		http := &trace.Scope{Name: "io.opentelemetry.http", Version: "1.2.3", Attributes: []trace.Attr{{Key: "scope.kind", Value: "server", Type: trace.TypeString}}}
		bare := &trace.Scope{Name: "db"}
		otel.Resources, otel.Scopes = []*trace.Resource{shop, db}, []*trace.Scope{http, bare}
		otel.Spans[0].Resource, otel.Spans[0].Scope = shop, http
		otel.Spans[1].Resource, otel.Spans[1].Scope = db, bare
		otel.Spans[2].Resource = shop
	}
	return []*trace.Trace{otel, kieker}
}

// goldenPayload encodes the golden traces of the current version as a
// block's raw payload.
func goldenPayload() []byte {
	e := encoder{syms: newSymbols()}
	var bodies [][]byte
	for _, t := range goldenTraces(bodyVersion) {
		bodies = append(bodies, bytes.Clone(e.encodeTrace(t)))
	}
	return appendPayload(nil, 1, e.newSyms, bodies)
}

// TestGoldenBlocks: a block written by every earlier version of the trace
// body still reads, to the traces it was written of; the current version
// writes its golden block byte for byte (docs/STORE.md describes it).
func TestGoldenBlocks(t *testing.T) {
	// body-vN.block: a zstd chunk (TBK2; TBK1 for version 1) of the
	// golden traces of body version N; chunk-s2.block: an S2 chunk
	// (TBK3, what the store writes) of the current version's.
	cur := filepath.Join("testdata", "body-v"+string(rune('0'+bodyVersion))+".block")
	curS2 := filepath.Join("testdata", "chunk-s2.block")
	hdr := blockHeader{count: 2, minStart: 5, maxEnd: 1_700_000_000_005_000_000}
	if *update {
		if err := os.WriteFile(cur, appendBlockV2(nil, goldenPayload(), hdr), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(curS2, appendBlock(nil, goldenPayload(), hdr), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The payload, not the block: zstd may compress the same bytes
	// differently in another version of the library.
	for _, path := range []string{cur, curS2} {
		if b, err := os.ReadFile(path); err != nil {
			t.Fatal(err)
		} else if h, raw, err := readBlock(bytes.NewReader(b), 0); err != nil {
			t.Fatalf("%s: %v", path, err)
		} else if !bytes.Equal(raw, goldenPayload()) {
			t.Errorf("the golden traces encode differently from %s (the trace body changed: bump its version, or run with -update)", path)
		} else if h.s2 != (path == curS2) {
			t.Errorf("%s: s2 = %v", path, h.s2)
		}
	}
	if b := appendBlock(nil, goldenPayload(), hdr); string(b[:4]) != blockMagic {
		t.Errorf("a chunk begins %q, want %q", b[:4], blockMagic)
	}
	for v := 1; v <= bodyVersion; v++ {
		path := filepath.Join("testdata", "body-v"+string(rune('0'+v))+".block")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h, raw, err := readBlock(bytes.NewReader(b), 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		pl, err := parsePayload(raw, h.version)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		syms := newSymbols()
		for _, s := range pl.syms {
			syms.id(s)
		}
		want := goldenTraces(v)
		if len(pl.traces) != len(want) {
			t.Fatalf("%s: %d traces, want %d", path, len(pl.traces), len(want))
		}
		for i, body := range pl.traces {
			got, err := decodeTrace(body, syms)
			if err != nil {
				t.Fatalf("%s: trace %d: %v", path, i, err)
			}
			if d := cmp.Diff(want[i], got, cmpopts.IgnoreUnexported(trace.Span{}), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("%s: trace %d (-want +got):\n%s", path, i, d)
			}
		}
	}
}

// TestOldBlocksInAStore: a store of version 1 whose segment holds the
// golden block of body version 1 (written before version 2, its symbols
// in the block only) is converted when opened; traces appended after it,
// to its host and another, go into blocks beside it; check finds nothing
// wrong, rebuild changes nothing, and every trace reads back.
func TestOldBlocksInAStore(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(filepath.Join(dir, v1Index), &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	old, err := os.ReadFile(filepath.Join("testdata", "body-v1.block"))
	if err != nil {
		t.Fatal(err)
	}
	hdir := filepath.Join(dir, v1Hosts, "1")
	if err := os.MkdirAll(hdir, 0o755); err != nil {
		t.Fatal(err)
	}
	seg := appendSegHeader(nil, segHeader{host: 1, seg: 1, created: 1})
	if err := os.WriteFile(filepath.Join(hdir, "00000001.seg"), append(seg, old...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hdir, v1NameFile), []byte("node-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Options{})
	if m := s.Recovery().Migrated; m == nil || m.Traces != 2 || len(m.Lost) != 0 {
		t.Fatalf("conversion of a version 1 segment: %+v", m)
	}
	v1, v2 := goldenTraces(1), goldenTraces(2)
	// The version 2 traces under other ids, on the same host.
	for i, tr := range v2 {
		tr.ID = trace.ID{Hi: 99, Lo: uint64(i + 1)}
	}
	if _, err := s.Append(v2); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if res, err := Check(dir, Options{}); err != nil || len(res.Problems) != 0 || res.Traces != 4 {
		t.Fatalf("check: %+v %v", res, err)
	}
	if res, err := Rebuild(dir, Options{}); err != nil || len(res.Problems) != 0 || len(res.Repaired) != 0 || res.Traces != 4 {
		t.Fatalf("rebuild: %+v %v", res, err)
	}
	s = open(t, dir, Options{})
	for _, want := range append(v1, v2...) {
		got, err := s.Get(want.ID)
		if err != nil {
			t.Fatalf("%s: %v", want.ID, err)
		}
		if d := cmp.Diff(want, got, cmpopts.IgnoreUnexported(trace.Span{}), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s (-want +got):\n%s", want.ID, d)
		}
	}
	p, err := s.Search(Query{Attrs: []trace.Attr{{Key: "deployment.environment", Value: "prod"}}, Limit: 10})
	if err != nil || len(p.Traces) != 1 || p.Traces[0].TraceID != v2[0].ID.String() {
		t.Errorf("deployment.environment=prod: %+v %v", p.Traces, err)
	}
}

// appendBlockV2 appends a TBK2 block (zstd), as stores before TBK3 wrote.
func appendBlockV2(dst, raw []byte, h blockHeader) []byte {
	start := len(dst)
	dst = append(dst, blockMagicV2...)
	dst = append(dst, make([]byte, blockHeaderSize-4)...)
	dst = encoder1().EncodeAll(raw, dst)
	return sealBlock(dst, start, len(raw), h)
}
