package lograte

import (
	"sync"
	"sync/atomic"
	"time"
)

// Outage turns a fault that fails every attempt while it lasts (a server
// away, a node cut off, a store refusing) into two log lines: one when it
// starts and one when it ends, saying how many failures came in between.
// The caller logs; Outage says when:
//
//	if o.Fail() {
//		log.Error("… failed", "node", node, "partition", p, "err", err)
//	}
//	…
//	if n := o.Recover(); n > 0 {
//		log.Info("… works again", "node", node, "partition", p, "failures", n)
//	}
//
// Metrics still count every failure. Use one Outage per thing that fails
// on its own (a partition's reader, a sink, a receiver), so that each
// fault event is logged once with what it concerns.
//
// A fault that comes back right after a success (a server that restarts
// answers once, then not again for a moment) is still one event when
// Settle is set: the outage then ends only with a success that comes
// Settle or more after the first success since the last failure, and a
// failure before that goes on with the same outage. The end is logged at
// such a success: a caller whose successes stop (no more traffic) logs
// it later, or with End when it stops.
//
// Concurrency: an Outage is safe for concurrent use; set Settle before
// its first use. Its zero value has no outage and no Settle.
type Outage struct {
	// Settle is how long successes must go on before they end an outage
	// (0: the first success ends it).
	Settle time.Duration

	failures atomic.Int64 // since the outage began; 0: none
	mu       sync.Mutex   // with Settle: guards okSince and failures' changes
	okSince  time.Time    // the first success since the last failure
}

// Fail counts a failure and reports whether it starts an outage (the
// first failure since the outage before ended): the caller then logs the
// fault.
func (o *Outage) Fail() (starts bool) {
	if o.Settle <= 0 {
		return o.failures.Add(1) == 1
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.okSince = time.Time{}
	return o.failures.Add(1) == 1
}

// Recover notes a success. When it ends the outage it returns the
// failures the outage counted (the caller then logs the end); else 0.
// Without an outage it only reads a counter, so a hot path may call it
// on every success.
func (o *Outage) Recover() (failures int64) {
	if o.failures.Load() == 0 {
		return 0
	}
	return o.RecoverAt(time.Now())
}

// RecoverAt is Recover at the time now, for tests.
func (o *Outage) RecoverAt(now time.Time) (failures int64) {
	if o.Settle <= 0 {
		return o.failures.Swap(0)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failures.Load() == 0 {
		return 0
	}
	if o.okSince.IsZero() {
		o.okSince = now
	}
	if now.Sub(o.okSince) < o.Settle {
		return 0
	}
	o.okSince = time.Time{}
	return o.failures.Swap(0)
}

// End ends the outage now, whatever Settle says (the caller stops), and
// returns the failures it counted; 0: there was none.
func (o *Outage) End() (failures int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.okSince = time.Time{}
	return o.failures.Swap(0)
}

// Failures is the number of failures of the current outage (0: none).
func (o *Outage) Failures() int64 { return o.failures.Load() }
