package split

import (
	"context"
	"github.com/tracebridge/tracebridge/internal/trace"
	"sync"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// relay is what Stage and Merger share: the consumer they pass records on
// to, the output window that holds records back until their trace is
// decided, the counts and the lock that guards all their state.
type relay struct {
	next  pipeline.Consumer
	opt   Options
	types trace.TypeCache

	mu       sync.Mutex // held by Consume, Flush and Finish
	out      output
	stats    Stats
	finished bool

	// snap is what Stats returns: stats as they were when the last call
	// of Consume, Flush or Finish returned. It has a lock of its own, so
	// Stats never waits for the next consumer (a disk).
	smu  sync.Mutex
	snap Stats
}

// Stats returns the counts as of the end of the last Consume, Flush or
// Finish. It may be called from any goroutine and never blocks on the
// stage's work.
func (r *relay) Stats() Stats {
	r.smu.Lock()
	defer r.smu.Unlock()
	return r.snap.clone()
}

// publish makes the current counts visible to Stats. r.mu is held.
// MalformedIDs only grows, so the snapshot may share its array.
func (r *relay) publish() {
	r.smu.Lock()
	r.snap = r.stats
	r.smu.Unlock()
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
