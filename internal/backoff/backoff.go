// Package backoff times retries: Exponential is a capped exponential
// back-off (the wait starts at Min and doubles up to Max, and starts over
// after Reset, typically on a successful connect), and Sleep waits for a
// back-off unless the caller's context ends first.
//
// Concurrency: an Exponential is safe for concurrent use (a client library
// may ask for the next wait on one goroutine and report a successful
// connect on another); it must not be copied after its first use.
package backoff

import (
	"context"
	"sync"
	"time"
)

// The bounds of an Exponential whose Min or Max is zero or less.
const (
	DefaultMin = 100 * time.Millisecond
	DefaultMax = 30 * time.Second
)

// Exponential is a capped exponential back-off: Next returns Min, then
// twice the previous wait, never more than Max. Its zero value waits
// DefaultMin doubling up to DefaultMax.
type Exponential struct {
	// Min is the first wait (zero or less: DefaultMin). Max caps the
	// waits (zero or less: DefaultMax); a Max below Min counts as Min.
	// Set them before the first use.
	Min, Max time.Duration

	mu  sync.Mutex
	cur time.Duration // the last wait returned; 0: none since Reset
}

// Next returns the next wait.
func (b *Exponential) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi <= 0 {
		hi = DefaultMax
	}
	hi = max(hi, lo)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.cur == 0:
		b.cur = lo
	case b.cur > hi/2: // doubling would pass hi (or overflow)
		b.cur = hi
	default:
		b.cur *= 2
	}
	return b.cur
}

// Reset makes the next wait Min again.
func (b *Exponential) Reset() {
	b.mu.Lock()
	b.cur = 0
	b.mu.Unlock()
}

// Sleep waits d or until ctx is done; it reports whether d passed (false
// when ctx is done already, whatever d is).
func Sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
