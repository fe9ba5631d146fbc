// Package throttle is a stage that limits the records per second passed to
// the next consumer (tracebridge replay --rate N).
//
// Batches are cut into chunks of at most rate/20 records (at least one), and
// a token bucket holding at most one chunk's worth of tokens spaces the
// chunks out, so records flow at the rate in steps of about 50 ms instead of
// in bursts of whole batches. Over n records the stage takes about
// (n - chunk)/rate seconds: the first chunk passes at once.
//
// Chunks are sub-batches of the caller's batch: their Records slice is a
// sub-slice of the original (capped, so appending to it cannot overwrite the
// rest), values are not copied. The next consumer must follow the batch
// contract of package pipeline and not keep them.
//
// Concurrency: a Stage is safe for concurrent use; the rate is shared by all
// callers. Waiting respects the caller's context.
package throttle

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// chunksPerSecond is how many chunks a second of records is cut into when
// the rate allows.
const chunksPerSecond = 20

// Stage passes records on at a limited rate.
type Stage struct {
	next  pipeline.Consumer
	rate  float64 // records per second; 0: no limit
	chunk int     // records per chunk

	sem    chan struct{} // guards the bucket and the timer; a channel so waiting for it respects ctx
	tokens float64
	last   time.Time
	timer  *time.Timer
}

var _ pipeline.Consumer = (*Stage)(nil)

// New returns a stage that passes at most rate records per second to next.
// A rate ≤ 0, NaN or +Inf means no limit: batches are passed through as
// they are.
func New(rate float64, next pipeline.Consumer) *Stage {
	s := &Stage{next: next, sem: make(chan struct{}, 1)}
	if rate > 0 && !math.IsInf(rate, 1) {
		s.rate = rate
		s.chunk = int(min(rate/chunksPerSecond, math.MaxInt32))
		s.chunk = max(s.chunk, 1)
		s.tokens = float64(s.chunk)
	}
	return s
}

// Rate returns the limit in records per second (0: none).
func (s *Stage) Rate() float64 { return s.rate }

// ChunkSize returns the most records handed on at once (0: no limit).
func (s *Stage) ChunkSize() int { return s.chunk }

// Consume hands b to the next consumer in chunks, waiting between them to
// keep the rate. If ctx is done while it waits, it returns an error wrapping
// ctx.Err(); the chunks before were handed on, the rest was not. An error of
// the next consumer is returned as it is, and the rest of b is not handed
// on.
func (s *Stage) Consume(ctx context.Context, b *record.Batch) error {
	if s.rate == 0 {
		return s.next.Consume(ctx, b)
	}
	n := b.Len()
	if n == 0 {
		return nil
	}
	var sub record.Batch
	for i := 0; i < n; {
		j := min(i+s.chunk, n)
		if err := s.take(ctx, j-i); err != nil {
			return fmt.Errorf("throttle: %d of %d records passed on: %w", i, n, err)
		}
		c := b
		if i > 0 || j < n {
			sub.Records = b.Records[i:j:j]
			c = &sub
		}
		if err := s.next.Consume(ctx, c); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// take waits until k tokens are available and takes them.
func (s *Stage) take(ctx context.Context, k int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	need := float64(k)
	for {
		now := time.Now()
		if !s.last.IsZero() {
			s.tokens = min(s.tokens+now.Sub(s.last).Seconds()*s.rate, float64(s.chunk))
		}
		s.last = now
		if s.tokens >= need {
			s.tokens -= need
			return nil
		}
		wait := time.Duration((need - s.tokens) / s.rate * float64(time.Second))
		if s.timer == nil {
			s.timer = time.NewTimer(wait)
		} else {
			s.timer.Reset(wait)
		}
		select {
		case <-s.timer.C:
		case <-ctx.Done():
			s.timer.Stop()
			return ctx.Err()
		}
	}
}
