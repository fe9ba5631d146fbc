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

// checkPace asserts the stage's guarantee: n records never pass faster
// than the rate allows (the first chunk at once, the rest at the rate).
// The upper bound only catches a stall: a loaded machine may take longer.
func checkPace(t *testing.T, n, chunk int, rate float64, d time.Duration) {
	t.Helper()
	least := time.Duration(float64(n-chunk) / rate * float64(time.Second))
	if d < least*98/100 {
		t.Fatalf("%d records at %v/s passed in %v, faster than the %v the rate allows", n, rate, d, least)
	}
	if d > 10*least+30*time.Second {
		t.Fatalf("%d records at %v/s took %v (the rate allows %v): stalled", n, rate, d, least)
	}
}

// TestRate: n records at R records/s take (n - chunk)/R s at least.
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
	checkPace(t, n, s.ChunkSize(), rate, time.Since(t0))
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
	checkPace(t, 3*n, s.ChunkSize(), rate, time.Since(t0))
	if len(c.recs) != 3*n {
		t.Fatalf("passed on %d records", len(c.recs))
	}
}

// TestCancel: a Consume waiting for the rate returns the context's error
// once it is cancelled, having passed on no more than the rate allowed
// meanwhile; a cancelled context stops the next call before it waits.
// Cancellation follows the first record's arrival, not a clock, and
// nothing is asserted about how quickly a loaded machine gets there.
func TestCancel(t *testing.T) {
	const rate = 10.0 // chunks of one record, one every 100 ms
	var c collector
	first := make(chan struct{})
	var once sync.Once
	s := New(rate, pipeline.ConsumerFunc(func(ctx context.Context, b *record.Batch) error {
		once.Do(func() { close(first) })
		return c.Consume(ctx, b)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-first
		cancel()
	}()
	t0 := time.Now()
	// 1000 records at 10/s would take 100 s.
	err := s.Consume(ctx, batch(0, 1000))
	d := time.Since(t0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume returned %v after %v, want the cancellation", err, d)
	}
	c.mu.Lock()
	n := len(c.recs)
	c.mu.Unlock()
	// The first record at once, then at most rate×d more.
	if limit := 1 + int(rate*d.Seconds()); n < 1 || n > limit {
		t.Fatalf("passed on %d records in %v before the cancellation, want 1..%d", n, d, limit)
	}
	// A cancelled context stops the next call before it waits.
	if err := s.Consume(ctx, batch(0, 5)); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.recs) != n {
		t.Fatalf("a cancelled call passed on %d records", len(c.recs)-n)
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
