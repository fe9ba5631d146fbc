package probe

import (
	"os"
	"time"
)

// Timestamps are nanoseconds since the Unix epoch, as Kieker's default
// time source gives them: the wall clock at start plus the monotonic time
// since, so they never go backwards.
//
// Reading a clock is most of what a probe costs, so the probes read the
// cheapest one that is good enough and the writer goroutine converts:
//
//   - where Linux itself keeps time with the processor's time-stamp counter
//     (clocksource tsc, which the kernel selects only when the counter is
//     invariant and synchronised across processors) on amd64, a probe
//     executes RDTSC, and the writer maps ticks to nanoseconds by a line
//     through anchor points (counter, clock) it takes on every pass, the
//     slope measured over the last second or more;
//   - everywhere else, and when TRACEBRIDGE_CLOCK=system, a probe reads the
//     monotonic clock (time.Since) and the writer adds the start time.
//
// On the machine of probe/README.md's figures RDTSC takes about 22 ns and
// time.Since about 50 ns; two are read per instrumented call.
var (
	epoch   = time.Now()
	epochNs = epoch.UnixNano()

	useTSC    = tscUsable() && os.Getenv("TRACEBRIDGE_CLOCK") != "system"
	tsc0, ns0 int64 // the first anchor, when useTSC
)

func init() {
	if useTSC {
		tsc0, ns0 = anchorAt()
	}
}

// Clock names the clock the probes read: "tsc" (the time-stamp counter)
// or "system" (the monotonic clock through time.Since).
func Clock() string {
	if useTSC {
		return "tsc"
	}
	return "system"
}

// stamp reads the probes' clock: counter ticks or monotonic nanoseconds.
func stamp() int64 {
	if useTSC {
		return rdtsc()
	}
	return int64(time.Since(epoch))
}

// anchorAt reads the counter and the clock (ns since the Unix epoch) as
// close together as it can.
func anchorAt() (tick, ns int64) {
	best := int64(-1)
	for range 5 {
		t1 := rdtsc()
		n := int64(time.Since(epoch))
		t2 := rdtsc()
		if d := t2 - t1; d >= 0 && (best < 0 || d < best) {
			best = d
			tick, ns = t1+d/2, epochNs+n
		}
	}
	return tick, ns
}

// converter turns stamps into nanoseconds since the Unix epoch. It belongs
// to a writer goroutine.
type converter struct {
	tick, ns     int64   // the latest anchor
	baseT, baseN int64   // the anchor the slope is measured from
	slope        float64 // ns per tick
}

// Calibration: the first slope is measured over at least minCalibration;
// later the slope is measured anew whenever the base anchor is older than
// recalibrate, so that it follows the clock's rate.
const (
	minCalibration = 20 * time.Millisecond
	recalibrate    = time.Second
)

// update takes a new anchor; the writer calls it before converting the
// events of a pass. The first call may sleep until minCalibration has
// passed since start.
func (c *converter) update() {
	if !useTSC {
		return
	}
	if c.slope == 0 {
		if d := minCalibration - time.Since(epoch); d > 0 {
			time.Sleep(d)
		}
		c.baseT, c.baseN = tsc0, ns0
	}
	tick, ns := anchorAt()
	if tick <= c.baseT { // the counter is not usable after all
		return
	}
	c.tick, c.ns = tick, ns
	if c.slope == 0 || time.Duration(ns-c.baseN) >= recalibrate {
		c.slope = float64(ns-c.baseN) / float64(tick-c.baseT)
		c.baseT, c.baseN = tick, ns
	}
}

// toNs converts a stamp.
func (c *converter) toNs(stamp int64) int64 {
	if !useTSC {
		return epochNs + stamp
	}
	return c.ns + int64(float64(stamp-c.tick)*c.slope)
}
