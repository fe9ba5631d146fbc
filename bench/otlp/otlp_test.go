package main

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

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
