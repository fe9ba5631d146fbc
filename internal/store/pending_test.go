package store

import (
	"bytes"
	"context"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// A head's pending bodies share one buffer that takes the next traces
// once a chunk is written: a search's view of the head reads its own
// copy, so a trace it found stays the same trace.
func TestHeadViewKeepsPendingBodies(t *testing.T) {
	s := open(t, t.TempDir(), Options{ChunkSize: 1 << 20, HeadSize: 64 << 20})
	first := mkTrace(0, "alpha", 4, 1_000_000, 100, true)
	if _, err := s.Append(one(first)); err != nil {
		t.Fatal(err)
	}
	p := s.partition("alpha")
	p.mu.RLock()
	v := s.headView(p, p.head)
	p.mu.RUnlock()
	want := bytes.Clone(bodyOf(t, v, 0))
	// The chunk written, the buffer is written again from its start.
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 50; i++ {
		if _, err := s.Append(one(mkTrace(i, "alpha", 6, int64(2_000_000+i), 50, false))); err != nil {
			t.Fatal(err)
		}
	}
	got := bodyOf(t, v, 0)
	if !bytes.Equal(got, want) {
		t.Fatalf("the view's first trace changed:\n got %x\nwant %x", got, want)
	}
	p.mu.RLock()
	tr, err := decodeTrace(got, p.head.syms)
	p.mu.RUnlock()
	if err != nil || tr.ID != first.ID || len(tr.Spans) != len(first.Spans) {
		t.Fatalf("the view's first trace: %v, id %v with %d spans, want %v with %d", err, tr.ID, len(tr.Spans), first.ID, len(first.Spans))
	}
}

func one(t *trace.Trace) []*trace.Trace { return []*trace.Trace{t} }

func bodyOf(t *testing.T, v *view, row int) []byte {
	t.Helper()
	body, err := v.body(context.Background(), v.rows.at(row))
	if err != nil {
		t.Fatal(err)
	}
	return body
}
