package broker

import (
	"context"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/record"
)

// FuzzMessage feeds one message of any body, content type and configured
// format to a Batcher: no input crashes it, every message is acknowledged
// exactly once (malformed ones too), and the text/binary decision is the
// one the package documents.
func FuzzMessage(f *testing.F) {
	m, _ := kdb.DefaultMapping(record.Builtin())
	bin, _ := kdb.AppendBinary(nil, 1, func() *record.Record {
		var bb record.Batch
		r := bb.Add(record.Builtin().Lookup(record.BeforeOperationEvent), -1)
		r.Values[3] = record.StringValue("op")
		return r
	}())
	for _, seed := range []struct {
		body, ct string
		format   uint8
	}{
		{"1;1795312705697789000;11727;0;search_book;Bookstore", "", 0},
		{"1;1;2;0;op;C\n1;1;2;1;op;C", "text/plain", 0},
		{string(bin), "application/octet-stream", 0},
		{string(bin), "", 0},
		{string(append(bin, 0, 0)), "", 2},
		{"9;unknown", "text/x", 1},
		{"", "", 0},
		{"\x00\x00\x00\x01", "text/plain; charset=utf-8", 0},
	} {
		f.Add([]byte(seed.body), seed.ct, seed.format)
	}
	f.Fuzz(func(t *testing.T, body []byte, ct string, format uint8) {
		out := &collect{}
		b := NewBatcher(Config{Name: "fuzz", Mapping: m, Format: Format(format % 3), MaxRecords: 1 << 20, MaxDelay: time.Hour}, Settings{}, out)
		acks := 0
		msg := Message{ID: "m", Body: body, ContentType: ct,
			Ack: func() error { acks++; return nil }, Nack: func() error { t.Fatal("nacked"); return nil }}
		text := b.isText(msg)
		switch {
		case Format(format%3) == Text && !text, Format(format%3) == Binary && text:
			t.Fatalf("format %d forced, isText %v", format%3, text)
		case Format(format%3) == Auto && len(ct) >= 5 && ct[:5] == "text/" && !text:
			t.Fatalf("content type %q not taken as text", ct)
		}
		if err := b.Add(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, batch := range out.batches {
			for _, d := range batch.Done {
				d(nil)
			}
		}
		if acks != 1 {
			t.Fatalf("acknowledged %d times", acks)
		}
		if b.Messages != 1 || b.Records < 0 {
			t.Fatalf("counters %d %d", b.Messages, b.Records)
		}
	})
}
