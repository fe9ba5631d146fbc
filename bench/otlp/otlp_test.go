package main

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/otlp"
)

func TestRequests(t *testing.T) {
	reqs := requests(3, 100, 1)
	seen := map[string]bool{}
	for _, r := range reqs {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(r.body); err != nil {
			t.Fatal(err)
		}
		if n := req.Traces().SpanCount(); n != r.spans || n != 100 {
			t.Errorf("%d spans, want 100", n)
		}
		if seen[string(r.body)] {
			t.Error("two requests alike")
		}
		seen[string(r.body)] = true
	}
}

// counter counts the records handed to it.
type counter struct{ n atomic.Int64 }

func (c *counter) Consume(_ context.Context, b *record.Batch) error {
	c.n.Add(int64(b.Len()))
	return nil
}

// TestDrive sends through the benchmark's own clients to tracebridge's
// receivers.
func TestDrive(t *testing.T) {
	g, err := otlp.NewGRPC(otlp.Config{Listen: "127.0.0.1:0"}, pipeline.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := otlp.NewHTTP(otlp.Config{Listen: "127.0.0.1:0"}, pipeline.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	out := &counter{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- g.Run(ctx, out) }()
	go func() { done <- h.Run(ctx, out) }()
	defer func() {
		cancel()
		<-done
		<-done
	}()
	reqs := requests(2, 50, 2)
	gs, err := newGRPCSender(g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTPSender(h.Addr().String(), 2)
	for _, s := range []sender{gs, hs} {
		d, err := drive(context.Background(), []sender{s, s}, reqs, 120)
		s.close()
		if err != nil {
			t.Fatal(err)
		}
		if d.spans != 150 || d.requests != 3 {
			t.Errorf("drove %d spans in %d requests, want 150 in 3", d.spans, d.requests)
		}
	}
	if n := out.n.Load(); n != 300 {
		t.Errorf("the receivers took %d spans, want 300", n)
	}
}

func TestFlags(t *testing.T) {
	if _, err := parseFlags([]string{"-protocols", "udp"}, io.Discard); err == nil {
		t.Error("unknown protocol accepted")
	}
	o, err := parseFlags([]string{"-spans", "10", "-protocols", "http"}, io.Discard)
	if err != nil || o.spans != 10 || len(o.protocols) != 1 {
		t.Errorf("%+v, %v", o, err)
	}
}

// TestStamp checks that every send carries traces of its own: the same
// request stamped with two numbers shares no trace id with itself or the
// other, and the spans of one trace keep one id.
func TestStamp(t *testing.T) {
	r := requests(1, 64, 7)[0]
	ids := func(body []byte) map[pcommon.TraceID]int {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			t.Fatal(err)
		}
		m := map[pcommon.TraceID]int{}
		rss := req.Traces().ResourceSpans()
		for i := range rss.Len() {
			sss := rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				spans := sss.At(j).Spans()
				for k := range spans.Len() {
					m[spans.At(k).TraceID()]++
				}
			}
		}
		return m
	}
	orig := ids(r.body)
	if len(orig) != 8 {
		t.Fatalf("%d traces in 64 spans, want 8", len(orig))
	}
	seen := map[pcommon.TraceID]bool{}
	for id := range orig {
		seen[id] = true
	}
	var buf []byte
	for _, seq := range []uint64{1, 2, 1 << 40} {
		buf = r.stamp(buf, seq)
		got := ids(buf)
		if len(got) != len(orig) {
			t.Fatalf("send %d: %d traces, want %d", seq, len(got), len(orig))
		}
		for id, n := range got {
			if n != 8 {
				t.Errorf("send %d: trace %v has %d spans, want 8", seq, id, n)
			}
			if seen[id] {
				t.Errorf("send %d: trace id %v sent before", seq, id)
			}
			seen[id] = true
		}
	}
}
