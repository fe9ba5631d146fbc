package split

import (
	"context"
	"sync"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// relay is what Stage and Merger share: the consumer they pass records on
// to, the output window that holds records back until their trace is
// decided, the counts and the lock that guards all their state.
type relay struct {
	next  pipeline.Consumer
	opt   Options
	types typeCache

	mu       sync.Mutex
	out      output
	stats    Stats
	finished bool
}

// Stats returns the counts so far. It may be called from any goroutine.
func (r *relay) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats.clone()
}

// flush passes on the records the window has released. r.mu is held.
func (r *relay) flush(ctx context.Context) error {
	r.out.drain()
	n := r.out.batch.Len()
	if n == 0 {
		return nil
	}
	r.stats.RecordsOut += int64(n)
	err := r.next.Consume(ctx, &r.out.batch)
	r.out.reset()
	return err
}

// report counts a malformed trace and tells Options.OnMalformed.
func (r *relay) report(id int64, reason string) {
	r.stats.malformed(Malformed{TraceID: id, Reason: reason}, r.opt.OnMalformed)
}
