package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
	// A refusal goes through the last message: its connection is the one
	// whose later acknowledgements would cover the refused messages.
	if got := strings.Join(log, ","); got != "ack 3,nack 5" {
		t.Fatalf("%s", got)
	}
}

// recorder makes messages whose Ack and Nack append to a log.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) msg(id, body string) Message {
	return Message{ID: id, Body: []byte(body),
		Ack:  func() error { r.add("ack " + id); return nil },
		Nack: func() error { r.add("nack " + id); return nil }}
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.log, ",")
}

func event(i int) string { return "1;1;2;" + string(rune('0'+i)) + ";op;C" }

// TestFlushFailureSettles: a batch the consumer does not take (queue
// closed, context cancelled, consumer error) is refused at once, so
// WaitSettled does not wait for a callback that never comes.
func TestFlushFailureSettles(t *testing.T) {
	m, _ := kdb.DefaultMapping(record.Builtin())
	nop := pipeline.ConsumerFunc(func(context.Context, *record.Batch) error { return nil })
	for _, tc := range []struct {
		name    string
		out     func() (pipeline.Consumer, context.Context)
		wantErr error
	}{
		{"queue closed", func() (pipeline.Consumer, context.Context) {
			q := pipeline.NewQueue(1, nop, nil)
			q.Close()
			return q, context.Background()
		}, pipeline.ErrClosed},
		{"queue aborted", func() (pipeline.Consumer, context.Context) {
			q := pipeline.NewQueue(1, nop, nil)
			q.Emit(context.Background(), &record.Batch{Records: []record.Record{{}}}) // full
			q.Abort()
			return q, context.Background()
		}, pipeline.ErrClosed},
		{"context cancelled on a full queue", func() (pipeline.Consumer, context.Context) {
			q := pipeline.NewQueue(1, nop, nil)
			q.Emit(context.Background(), &record.Batch{Records: []record.Record{{}}}) // full
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return q, ctx
		}, context.Canceled},
		{"consumer error", func() (pipeline.Consumer, context.Context) {
			return pipeline.ConsumerFunc(func(context.Context, *record.Batch) error { return errSink }), context.Background()
		}, errSink},
		{"consumer error after calling Done itself", func() (pipeline.Consumer, context.Context) {
			return pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
				for _, d := range b.TakeDone() {
					d(errSink)
				}
				return errSink
			}), context.Background()
		}, errSink},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cumulative := range []bool{false, true} {
				out, ctx := tc.out()
				b := NewBatcher(Config{Mapping: m, MaxDelay: time.Hour, Cumulative: cumulative}, Settings{}, out)
				var r recorder
				b.Add(ctx, r.msg("a", event(0)))
				b.Add(ctx, r.msg("b", event(1)))
				if err := b.Flush(ctx); !errors.Is(err, tc.wantErr) {
					t.Fatalf("Flush: %v, want %v", err, tc.wantErr)
				}
				t0 := time.Now()
				if !b.WaitSettled(SettleWait) || time.Since(t0) > 100*time.Millisecond {
					t.Fatalf("cumulative %v: WaitSettled took %v", cumulative, time.Since(t0))
				}
				want := "nack a,nack b"
				if cumulative {
					want = "nack b"
				}
				if got := r.String(); got != want {
					t.Fatalf("cumulative %v: %s, want %s", cumulative, got, want)
				}
				if b.Unacked() != 0 || b.Pending() {
					t.Fatalf("unacked %d pending %v", b.Unacked(), b.Pending())
				}
			}
		})
	}
}

var errSink = errors.New("sink refused (test)")

// TestDiscard: what a lost connection left in the batch is dropped without
// acknowledgement; the next batch holds only later messages.
func TestDiscard(t *testing.T) {
	m, _ := kdb.DefaultMapping(record.Builtin())
	out := &collect{}
	b := NewBatcher(Config{Mapping: m, MaxDelay: time.Hour, Cumulative: true}, Settings{}, out)
	var r recorder
	ctx := context.Background()
	b.Add(ctx, r.msg("old1", event(0)))
	b.Add(ctx, r.msg("old2", event(1)))
	b.Discard()
	if b.Pending() || b.Unacked() != 0 || b.Due(time.Now().Add(2*time.Hour)) {
		t.Fatalf("after Discard: pending %v unacked %d", b.Pending(), b.Unacked())
	}
	b.Add(ctx, r.msg("new1", event(2)))
	b.Add(ctx, r.msg("new2", event(3)))
	if b.Unacked() != 2 {
		t.Fatalf("unacked %d", b.Unacked())
	}
	b.Flush(ctx)
	if len(out.batches) != 1 || out.batches[0].Len() != 2 || out.batches[0].Records[0].Values[2].Int() != 2 {
		t.Fatalf("batches %v", out.batches)
	}
	out.batches[0].Done[0](errSink)
	if got := r.String(); got != "nack new2" {
		t.Fatalf("%s", got)
	}
	if b.Unacked() != 0 || !b.WaitSettled(time.Second) {
		t.Fatalf("unacked %d", b.Unacked())
	}
}

// TestWindow: with a window, the batch is handed on when the number of
// unsettled messages, counting those handed on and not yet settled,
// reaches the window; beyond it messages are batched as usual.
func TestWindow(t *testing.T) {
	m, _ := kdb.DefaultMapping(record.Builtin())
	out := &collect{}
	b := NewBatcher(Config{Mapping: m, MaxDelay: time.Hour, Window: 3}, Settings{}, out)
	var r recorder
	ctx := context.Background()
	b.Add(ctx, r.msg("1", event(1)))
	b.Add(ctx, r.msg("2", event(2)))
	if len(out.batches) != 0 {
		t.Fatal("handed on below the window")
	}
	b.Add(ctx, r.msg("3", event(3)))
	if len(out.batches) != 1 || b.Unacked() != 3 {
		t.Fatalf("batches %d unacked %d, want 1 and 3", len(out.batches), b.Unacked())
	}
	b.Add(ctx, r.msg("4", event(4))) // beyond the window: held
	if len(out.batches) != 1 || b.Unacked() != 4 {
		t.Fatalf("batches %d unacked %d, want 1 and 4", len(out.batches), b.Unacked())
	}
	out.batches[0].Done[0](nil)
	b.Add(ctx, r.msg("5", event(5)))
	if len(out.batches) != 1 || b.Unacked() != 2 {
		t.Fatalf("batches %d unacked %d after the acknowledgement, want 1 and 2", len(out.batches), b.Unacked())
	}
	b.Add(ctx, r.msg("6", event(6))) // reaches the window again
	if len(out.batches) != 2 || out.batches[1].Len() != 3 {
		t.Fatalf("batches %d", len(out.batches))
	}
	out.batches[1].Done[0](nil)
	if got := r.String(); got != "ack 1,ack 2,ack 3,ack 4,ack 5,ack 6" {
		t.Fatalf("%s", got)
	}
	if b.Unacked() != 0 {
		t.Fatalf("unacked %d", b.Unacked())
	}
}

// TestTransform: the transform sees the records of each message, also the
// good ones of a malformed message, and may drop records.
func TestTransform(t *testing.T) {
	m, _ := kdb.DefaultMapping(record.Builtin())
	out := &collect{}
	var froms []int
	b := NewBatcher(Config{Mapping: m, MaxDelay: time.Hour, Transform: func(b *record.Batch, from int) {
		froms = append(froms, from)
		for i := from; i < b.Len(); i++ {
			b.Records[i].Values[0] = record.IntValue(b.Records[i].Values[0].Int() * 1000)
		}
		if b.Records[b.Len()-1].Values[2].Int() == 9 {
			b.Truncate(b.Len() - 1)
		}
	}}, Settings{}, out)
	ctx := context.Background()
	b.Add(ctx, Message{Body: []byte("1;5;2;0;op;C\n1;6;2;1;op;C")})
	b.Add(ctx, Message{Body: []byte("1;7;2;2;op;C\n1;x;2;3;op;C")}) // second record malformed
	b.Add(ctx, Message{Body: []byte("1;x;2;4;op;C")})               // nothing good: no call
	b.Add(ctx, Message{Body: []byte("1;8;2;9;op;C")})               // dropped by the transform
	b.Flush(ctx)
	if d := cmp.Diff([]int{0, 2, 3}, froms); d != "" {
		t.Fatalf("transform called from (-want +got):\n%s", d)
	}
	var got []int64
	for _, r := range out.batches[0].Records {
		got = append(got, r.Values[0].Int())
	}
	if d := cmp.Diff([]int64{5000, 6000, 7000}, got); d != "" || b.Records != 3 {
		t.Fatalf("timestamps (-want +got):\n%s\ncounted %d", d, b.Records)
	}
}
