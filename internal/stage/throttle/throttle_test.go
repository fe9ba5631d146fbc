package throttle

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var typ = record.Builtin().Lookup(record.BeforeOperationEvent)

func batch(first, n int) *record.Batch {
	b := &record.Batch{}
	for i := first; i < first+n; i++ {
		r := b.Add(typ, int64(i))
		r.Values[2] = record.IntValue(int64(i))
		r.Values[3] = record.StringValue("op")
	}
	return b
}

// collector keeps copies of what it is handed, and the chunk sizes.
type collector struct {
	mu     sync.Mutex
	recs   []record.Record
	chunks []int
	first  []*record.Record // address of each chunk's first record
}

func (c *collector) Consume(_ context.Context, b *record.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range b.Records {
		c.recs = append(c.recs, b.Records[i].Clone())
	}
	c.chunks = append(c.chunks, b.Len())
	if b.Len() > 0 {
		c.first = append(c.first, &b.Records[0])
	}
	return nil
}

var cmpRecords = []cmp.Option{
	cmp.Comparer(func(a, b record.Value) bool { return a.Equal(b) }),
	cmp.Comparer(func(a, b *record.Type) bool { return a == b }),
}

func TestChunks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rate      float64
		n         int
		wantChunk int
		chunks    []int
	}{
		{"rate/20", 400, 105, 20, []int{20, 20, 20, 20, 20, 5}},
		{"fits one chunk", 400, 20, 20, []int{20}},
		{"at least one", 10, 3, 1, []int{1, 1, 1}},
		{"fractional rate", 25.5, 3, 1, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c collector
			s := New(tc.rate, &c)
			if s.ChunkSize() != tc.wantChunk || s.Rate() != tc.rate {
				t.Fatalf("chunk %d rate %v", s.ChunkSize(), s.Rate())
			}
			b := batch(0, tc.n)
			if err := s.Consume(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.chunks, c.chunks); diff != "" {
				t.Fatalf("chunk sizes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(b.Records, c.recs, cmpRecords...); diff != "" {
				t.Fatalf("records (-sent +passed on):\n%s", diff)
			}
			// Chunks are views of the batch, not copies.
			at := 0
			for i, p := range c.first {
				if p != &b.Records[at] {
					t.Fatalf("chunk %d is a copy", i)
				}
				at += c.chunks[i]
			}
		})
	}
}

// TestRate checks loosely that n records at R records/s take about n/R s.
func TestRate(t *testing.T) {
	const rate, n = 2000.0, 3000
	var c collector
	s := New(rate, &c)
	t0 := time.Now()
	for i := 0; i < n; i += 1000 {
		if err := s.Consume(context.Background(), batch(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	d := time.Since(t0)
	want := time.Duration(n / rate * float64(time.Second))
	if d < want/2 || d > 3*want {
		t.Fatalf("%d records at %v/s took %v, want about %v", n, rate, d, want)
	}
	if len(c.recs) != n {
		t.Fatalf("passed on %d records", len(c.recs))
	}
	for _, k := range c.chunks {
		if k > int(rate/20) {
			t.Fatalf("chunk of %d records", k)
		}
	}
}

// TestRateShared: concurrent callers share one rate.
func TestRateShared(t *testing.T) {
	const rate, n = 2000.0, 500
	var c collector
	s := New(rate, &c)
	t0 := time.Now()
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			if err := s.Consume(context.Background(), batch(g*n, n)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	d := time.Since(t0)
	want := time.Duration(3 * n / rate * float64(time.Second))
	if d < want/2 || d > 3*want {
		t.Fatalf("3×%d records at %v/s took %v, want about %v", n, rate, d, want)
	}
	if len(c.recs) != 3*n {
		t.Fatalf("passed on %d records", len(c.recs))
	}
}

func TestCancel(t *testing.T) {
	var c collector
	s := New(10, &c)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)
	t0 := time.Now()
	err := s.Consume(ctx, batch(0, 1000))
	if d := time.Since(t0); d > 400*time.Millisecond {
		t.Fatalf("returned %v after the start, cancelled at 150ms", d)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	// One record at once, one after 100 ms.
	if n := len(c.recs); n < 1 || n > 3 {
		t.Fatalf("passed on %d records before the cancellation", n)
	}
	// A cancelled context stops the next call before it waits.
	if err := s.Consume(ctx, batch(0, 5)); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func TestPassThrough(t *testing.T) {
	for _, rate := range []float64{0, -5, math.NaN(), math.Inf(1)} {
		var got *record.Batch
		s := New(rate, pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
			got = b
			return nil
		}))
		if s.Rate() != 0 || s.ChunkSize() != 0 {
			t.Fatalf("rate %v: limit %v, chunk %d", rate, s.Rate(), s.ChunkSize())
		}
		b := batch(0, 100_000)
		if err := s.Consume(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		if got != b {
			t.Fatalf("rate %v: batch not passed through as it is", rate)
		}
	}
}

func TestNextError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	s := New(1000, pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		if calls++; calls == 2 {
			return boom
		}
		return nil
	}))
	if err := s.Consume(context.Background(), batch(0, 500)); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("next called %d times after failing", calls)
	}
	if err := s.Consume(context.Background(), &record.Batch{}); err != nil || calls != 2 {
		t.Fatalf("empty batch: %v, %d calls", err, calls)
	}
}
