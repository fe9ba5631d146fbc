package probe

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/record"
)

// rec is a decoded record in a form go-cmp can compare.
type rec struct {
	Type   string
	LTS    int64
	Values []any
}

func simplify(recs []record.Record) []rec {
	out := make([]rec, 0, len(recs))
	for _, r := range recs {
		s := rec{Type: r.Type.ShortName(), LTS: r.LoggingTimestamp}
		for i, f := range r.Type.Fields {
			if f.Kind == record.String {
				s.Values = append(s.Values, r.Values[i].Str())
			} else {
				s.Values = append(s.Values, r.Values[i].Int())
			}
		}
		out = append(out, s)
	}
	return out
}

// decodeAll decodes one connection's bytes with the bridge's decoder, fed
// in pieces of at most chunk bytes.
func decodeAll(t testing.TB, b []byte, chunk int) ([]rec, error) {
	t.Helper()
	recs, err := decodeSplit(b, func(int) int { return chunk })
	if errors.Is(err, errUndecoded) {
		t.Fatal(err)
	}
	return recs, err
}

// encodeEvents encodes evs as the writer goroutine does (TraceMetadata and
// JoinEvent as pairs of events) on one connection.
func encodeEvents(r *registry, evs []event, host uint32) []byte {
	var b []byte
	for i := 0; i < len(evs); i++ {
		ev := evs[i]
		var ext event
		if paired(ev.kind) {
			i++
			ext = evs[i]
		}
		b = r.appendEvent(b, &ev, &ext, host)
	}
	return b
}

func TestEncodeDecode(t *testing.T) {
	opA := NewOp("public void a.B.c(int)", "a.B")
	opU := NewOp("void ünïcödé.Klass.mëthod()", "ünïcödé.Klass")
	host := names.intern("host-1")
	sess := names.intern("session-7")
	cause := names.intern("java.lang.IllegalStateException: ärger")
	evs := []event{
		{kind: kindMeta, ts: 1000, trace: 42, order: -1, str: sess},
		{kind: kindMetaExt, ts: 7, trace: 42},
		{kind: kindBefore, ts: 1001, trace: 42, order: 0, op: opA.id},
		{kind: kindBefore, ts: 1002, trace: 42, order: 1, op: opU.id},
		{kind: kindFailed, ts: 1003, trace: 42, order: 2, op: opU.id, str: cause},
		{kind: kindSplit, ts: 1004, trace: 42, order: 3},
		{kind: kindJoin, ts: 1005, trace: 42, order: 4},
		{kind: kindJoinExt, trace: 43},
		{kind: kindAfter, ts: 1006, trace: 42, order: 5, op: opA.id},
		{kind: kindMeta, ts: 2000, trace: 43, order: 3, str: strEmpty},
		{kind: kindMetaExt, ts: 0, trace: 42},
		{kind: kindBefore, ts: 2001, trace: 43, order: 0},
		{kind: kindAfter, ts: 2002, trace: 43, order: 1},
	}
	unknown := []any{int64(2001), int64(43), int64(0), Unknown, Unknown}
	want := []rec{
		{"TraceMetadata", 1000, []any{int64(42), int64(7), "session-7", "host-1", int64(42), int64(-1)}},
		{"BeforeOperationEvent", 1001, []any{int64(1001), int64(42), int64(0), "public void a.B.c(int)", "a.B"}},
		{"BeforeOperationEvent", 1002, []any{int64(1002), int64(42), int64(1), "void ünïcödé.Klass.mëthod()", "ünïcödé.Klass"}},
		{"AfterOperationFailedEvent", 1003, []any{int64(1003), int64(42), int64(2), "void ünïcödé.Klass.mëthod()", "ünïcödé.Klass", "java.lang.IllegalStateException: ärger"}},
		{"SplitEvent", 1004, []any{int64(1004), int64(42), int64(3)}},
		{"JoinEvent", 1005, []any{int64(1005), int64(42), int64(4), int64(43)}},
		{"AfterOperationEvent", 1006, []any{int64(1006), int64(42), int64(5), "public void a.B.c(int)", "a.B"}},
		{"TraceMetadata", 2000, []any{int64(43), int64(0), "", "host-1", int64(42), int64(3)}},
		{"BeforeOperationEvent", 2001, unknown},
		{"AfterOperationEvent", 2002, []any{int64(2002), int64(43), int64(1), Unknown, Unknown}},
	}
	var r registry
	r.reset()
	first := encodeEvents(&r, evs, host)
	for _, chunk := range []int{len(first), 1, 7} {
		got, err := decodeAll(t, first, chunk)
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("chunk %d (-want +got):\n%s", chunk, diff)
		}
	}

	// The same events again on the same connection: no registry entries.
	again := encodeEvents(&r, evs, host)
	frames := 2*sizeMeta + 5*sizeEvent + sizeFailed + sizeSplit + sizeJoin
	if len(again) != frames {
		t.Errorf("second encoding on the connection is %d bytes, want %d (frames only)", len(again), frames)
	}
	got, err := decodeAll(t, append(first[:len(first):len(first)], again...), 64)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(want, want...), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// A new connection: a new registry, ids from 0, decodable on its own.
	r.reset()
	fresh := encodeEvents(&r, evs, host)
	if string(fresh) != string(first) {
		t.Error("a reset registry encodes differently from a new one")
	}
}

// TestWireBytes checks the bytes of a Before event on a fresh connection:
// registry entries for the class name, the operation and the class, ids
// 0, 1, 2, byte lengths, then the frame.
func TestWireBytes(t *testing.T) {
	op := NewOp("öp", "c")
	var r registry
	r.reset()
	ev := event{kind: kindBefore, ts: 0x0102030405060708, trace: -2, order: 9, op: op.id}
	got := r.appendEvent(nil, &ev, nil, strEmpty)
	be := binary.BigEndian
	var want []byte
	entry := func(id int32, s string) {
		want = be.AppendUint32(want, 0xffffffff)
		want = be.AppendUint32(want, uint32(id))
		want = be.AppendUint32(want, uint32(len(s)))
		want = append(want, s...)
	}
	entry(0, classBefore)
	entry(1, "öp")
	entry(2, "c")
	want = be.AppendUint32(want, 0)
	want = be.AppendUint64(want, 0x0102030405060708)
	want = be.AppendUint64(want, 0x0102030405060708)
	want = be.AppendUint64(want, 0xfffffffffffffffe)
	want = be.AppendUint32(want, 9)
	want = be.AppendUint32(want, 1)
	want = be.AppendUint32(want, 2)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := len("öp"); n != 3 {
		t.Fatalf("byte length %d", n)
	}
}
