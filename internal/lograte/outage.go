package lograte

import "sync/atomic"

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
// Concurrency: an Outage is safe for concurrent use; its zero value has
// no outage. Failures and successes that interleave (a fault that comes
// and goes) log each start and end.
type Outage struct {
	failures atomic.Int64 // since the outage began; 0: none
}

// Fail counts a failure and reports whether it starts an outage (the
// first failure since the last Recover): the caller then logs the fault.
func (o *Outage) Fail() (starts bool) { return o.failures.Add(1) == 1 }

// Recover ends the outage, if there is one, and returns the failures it
// counted; 0 means there was none (nothing to log). Without an outage it
// only reads a counter, so a hot path may call it on every success.
func (o *Outage) Recover() (failures int64) {
	if o.failures.Load() == 0 {
		return 0
	}
	return o.failures.Swap(0)
}

// Failures is the number of failures of the current outage (0: none).
func (o *Outage) Failures() int64 { return o.failures.Load() }
