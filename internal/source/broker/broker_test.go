package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

type collect struct {
	mu      sync.Mutex
	batches []*record.Batch
}

func (c *collect) Consume(_ context.Context, b *record.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := &record.Batch{}
	for i := range b.Records {
		cp.AddRecord(&b.Records[i])
	}
	cp.Done = b.TakeDone()
	c.batches = append(c.batches, cp)
	return nil
}

func TestBatcher(t *testing.T) {
	m, _ := kdb.DefaultMapping(record.Builtin())
	out := &collect{}
	var dead []string
	b := NewBatcher(Config{Name: "t", Mapping: m, MaxRecords: 3, MaxDelay: time.Hour,
		DeadLetter: func(m Message, reason error) error { dead = append(dead, m.ID+": "+reason.Error()); return nil }}, Settings{}, out)
	var acked, nacked []string
	msg := func(id, body, ct string) Message {
		return Message{ID: id, Body: []byte(body), ContentType: ct,
			Ack:  func() error { acked = append(acked, id); return nil },
			Nack: func() error { nacked = append(nacked, id); return nil }}
	}
	bin, _ := kdb.AppendBinary(nil, 1, func() *record.Record {
		var bb record.Batch
		r := bb.Add(record.Builtin().Lookup(record.BeforeOperationEvent), -1)
		r.Values[3] = record.StringValue("op")
		return r
	}())
	ctx := context.Background()
	b.Add(ctx, msg("a", "1;1;2;0;op;C\n1;1;2;1;op;C", ""))        // text, two records
	b.Add(ctx, msg("b", "1;x;2;2;op;C", "text/plain"))            // malformed
	b.Add(ctx, msg("c", string(bin), "application/octet-stream")) // binary: batch full
	b.Add(ctx, msg("d", string(append(bin, 0, 0)), ""))           // binary with a cut record
	if len(out.batches) != 1 || out.batches[0].Len() != 3 {
		t.Fatalf("batches %d", len(out.batches))
	}
	if !b.Pending() {
		t.Fatal("message d should be pending")
	}
	b.Flush(ctx)
	if len(dead) != 2 || !strings.HasPrefix(dead[0], "b: line 1") || !strings.Contains(dead[1], "message ends inside a record") {
		t.Fatalf("dead letters %q", dead)
	}
	out.batches[0].Done[0](nil)
	out.batches[1].Done[0](errors.New("sink failed"))
	if strings.Join(acked, ",") != "a,b,c" || strings.Join(nacked, ",") != "d" {
		t.Fatalf("acked %v nacked %v", acked, nacked)
	}
	if !b.WaitSettled(time.Second) {
		t.Fatal("not settled")
	}
	if b.Messages != 4 || b.Malformed != 2 || b.Records != 4 {
		t.Fatalf("counters %d %d %d", b.Messages, b.Malformed, b.Records)
	}
}

func TestDueAndEmitter(t *testing.T) {
	m, _ := kdb.DefaultMapping(record.Builtin())
	q := pipeline.NewQueue(4, pipeline.ConsumerFunc(func(context.Context, *record.Batch) error { return nil }), nil)
	b := NewBatcher(Config{Mapping: m, MaxDelay: 10 * time.Millisecond}, Settings{}, q)
	b.Add(context.Background(), Message{Body: []byte("1;1;2;0;op;C")})
	if b.Due(time.Now()) {
		t.Fatal("due at once")
	}
	if !b.Due(time.Now().Add(20 * time.Millisecond)) {
		t.Fatal("not due after MaxDelay")
	}
	if err := b.Flush(context.Background()); err != nil || q.Depth() != 1 {
		t.Fatalf("flush %v depth %d", err, q.Depth())
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	if got[0] != time.Millisecond || got[3] != 5*time.Millisecond || got[4] != 5*time.Millisecond {
		t.Fatalf("%v", got)
	}
	b.Reset()
	if b.Next() != time.Millisecond {
		t.Fatal("reset")
	}
}

func TestParseFormat(t *testing.T) {
	for s, want := range map[string]Format{"": Auto, "auto": Auto, "text": Text, "binary": Binary} {
		if f, err := ParseFormat(s); err != nil || f != want {
			t.Errorf("%q", s)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("xml accepted")
	}
}

func TestCumulativeSettle(t *testing.T) {
	var log []string
	msg := func(id string) Message {
		return Message{ID: id,
			Ack:  func() error { log = append(log, "ack "+id); return nil },
			Nack: func() error { log = append(log, "nack "+id); return nil }}
	}
	settleCumulative([]Message{msg("1"), msg("2"), msg("3")}, nil)
	settleCumulative([]Message{msg("4"), msg("5")}, errors.New("sink failed"))
	settleCumulative(nil, nil)
	if got := strings.Join(log, ","); got != "ack 3,nack 4" {
		t.Fatalf("%s", got)
	}
}
