package memlimit

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Shares of the limit.
const (
	// GoPercent: the Go runtime's soft limit (debug.SetMemoryLimit,
	// GoLimit) is this share of the limit less the reserve (the binary's
	// pages); the rest is for the runtime's overshoot of a soft limit.
	GoPercent = 85
	// HighPercent: refusing starts when usage reaches this share of the
	// Go runtime's soft limit.
	HighPercent = 70
	// LowPercent: refusing stops when usage falls below this share of it.
	LowPercent = 60
	// FloorPercent: the soft limit a target sets is raised to usage plus
	// this share of it (SoftLimit), so live data that outgrows the target
	// takes the soft limit up with it.
	FloorPercent = 25
)

// DefaultTarget is the memory target (Options.Target) `tracebridge serve`
// uses when the configuration sets neither memory_limit nor
// memory_target (a program embedding the bridge gets none: its heap is
// not only the bridge's).
const DefaultTarget = 256 << 20

// Defaults of Options.
const (
	DefaultInterval  = 100 * time.Millisecond
	DefaultLogPeriod = 10 * time.Second
	// forceGCAfter: while refusing, a collection is run when none ran
	// for this long, so the live heap is measured again.
	forceGCAfter = 500 * time.Millisecond
)

// Options configure a Limiter.
type Options struct {
	// Limit is the process's memory limit in bytes (> 0).
	Limit int64
	// Reserve is what the process holds outside the Go runtime (the
	// binary's pages in memory: FileRSS), taken off the limit before
	// GoPercent; at most half the limit.
	Reserve int64
	// Logger hears when refusing starts and stops; nil discards.
	Logger *slog.Logger
	// Interval is how often usage is sampled (DefaultInterval).
	Interval time.Duration
	// LogPeriod bounds the start lines: at most one per period
	// (DefaultLogPeriod).
	LogPeriod time.Duration
	// Target is the size the process aims to stay under (0: none, the
	// limit): the Go runtime's soft limit is then GoPercent of it less
	// the reserve (GoTarget), raised while usage comes near it
	// (SoftLimit). Above the limit it is the limit.
	Target int64
	// SetSoft, if set, is called by Sample with the soft limit for the
	// usage it measured (SoftLimit), when it changed by more than 1/32
	// since the last call, and by the first Sample: serve passes
	// debug.SetMemoryLimit.
	SetSoft func(bytes int64)
	// Usage, if set, replaces the runtime's figures (tests): it returns
	// the usage in bytes and whether a collection ran since the last call.
	Usage func() (usage int64, collected bool)
}

// Stats are a Limiter's figures.
type Stats struct {
	// Limit is the limit in bytes; Usage the last sampled usage.
	Limit, Usage int64
	// Refusing says whether receivers are refusing now.
	Refusing bool
	// Refusals counts Admit calls that refused; Episodes the times
	// refusing started.
	Refusals, Episodes int64
}

// Limiter tells receivers whether to take new data. Its zero value is not
// usable; New makes one.
type Limiter struct {
	opt       Options
	goLimit   int64
	goTarget  int64
	high, low int64
	usage     func() (int64, bool)

	refusing atomic.Bool
	used     atomic.Int64
	refusals atomic.Int64
	episodes atomic.Int64

	mu      sync.Mutex
	resumed chan struct{} // closed when refusing stops; replaced when it starts

	// The sampler's own state (Run's goroutine only).
	sampler    runtimeUsage
	soft       int64 // the soft limit SetSoft was last given
	lastGC     time.Time
	started    time.Time // when the current episode started
	startRefs  int64     // refusals when it started
	lastLine   time.Time // when a start line was last logged
	logged     bool      // the current episode's start was logged
	unreported int64     // episodes not logged since the last line
}

// New returns a Limiter for opt.Limit bytes; it refuses nothing until
// Run samples.
func New(opt Options) *Limiter {
	if opt.Interval <= 0 {
		opt.Interval = DefaultInterval
	}
	if opt.LogPeriod <= 0 {
		opt.LogPeriod = DefaultLogPeriod
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	g := goShare(opt.Limit, opt.Reserve)
	l := &Limiter{opt: opt, goLimit: g, high: g * HighPercent / 100, low: g * LowPercent / 100, resumed: make(chan struct{})}
	l.goTarget = g
	if l.Target() > 0 {
		l.goTarget = goShare(opt.Target, opt.Reserve)
	}
	close(l.resumed)
	l.usage = opt.Usage
	if l.usage == nil {
		l.sampler.init()
		l.usage = l.sampler.read
	}
	return l
}

// Limit returns the limit in bytes.
func (l *Limiter) Limit() int64 { return l.opt.Limit }

// GoLimit returns the Go runtime's soft limit for the limit:
// GoPercent of the limit less the reserve.
func (l *Limiter) GoLimit() int64 { return l.goLimit }

// goShare is the Go runtime's share of size: GoPercent of it less the
// reserve (the reserve at most half of it).
func goShare(size, reserve int64) int64 {
	return (size - min(max(reserve, 0), size/2)) * GoPercent / 100
}

// Target returns the target in effect (Options.Target below the limit),
// 0 when there is none.
func (l *Limiter) Target() int64 {
	if l.opt.Target > 0 && l.opt.Target < l.opt.Limit {
		return l.opt.Target
	}
	return 0
}

// GoTarget returns the Go runtime's soft limit for the target: GoPercent
// of the target less the reserve (the reserve at most half the target);
// GoLimit without a target or with one at or above the limit.
func (l *Limiter) GoTarget() int64 { return l.goTarget }

// SoftLimit returns the Go runtime's soft limit for a usage: GoTarget,
// raised to usage plus FloorPercent of it when that is more, at most
// GoLimit. Below the target the collector runs as GOGC says (the soft
// limit is above its goal); near the target it runs more often, and a
// bridge whose live data outgrows the target does not keep it running
// back to back (Sample applies it every Interval: see the package
// comment); nothing is refused for it (that is the limit's, at
// HighPercent of GoLimit).
func (l *Limiter) SoftLimit(usage int64) int64 {
	return min(max(l.goTarget, usage+usage*FloorPercent/100), l.goLimit)
}

// Budget is GoTarget: the memory the Go runtime aims to stay within
// (the target's share when there is a target, else the limit's), which
// components size their caches and buffers by (pipeline.Memory). Until
// 2026-11-29 it was the limit's share even under a target: the store's
// read cache took 256 MiB and its heads 32 MiB under `serve`'s 256 MiB
// target.
func (l *Limiter) Budget() int64 { return l.goTarget }

// Admit reports whether a receiver may take new data now. false counts a
// refusal: the receiver answers with its protocol's retryable answer.
func (l *Limiter) Admit() bool {
	if !l.refusing.Load() {
		return true
	}
	l.refusals.Add(1)
	return false
}

// Wait returns once the Limiter takes data again (at once when it does),
// or with ctx's error when ctx ends first.
func (l *Limiter) Wait(ctx context.Context) error {
	if !l.refusing.Load() {
		return nil
	}
	l.mu.Lock()
	ch := l.resumed
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns the Limiter's figures.
func (l *Limiter) Stats() Stats {
	return Stats{Limit: l.opt.Limit, Usage: l.used.Load(), Refusing: l.refusing.Load(),
		Refusals: l.refusals.Load(), Episodes: l.episodes.Load()}
}

// Run samples usage every Interval until ctx ends; when it ends, the
// Limiter takes data again (a stopping bridge drains its receivers).
func (l *Limiter) Run(ctx context.Context) {
	t := time.NewTicker(l.opt.Interval)
	defer t.Stop()
	l.lastGC = time.Now()
	for {
		l.Sample(time.Now())
		select {
		case <-ctx.Done():
			l.set(false, time.Now())
			return
		case <-t.C:
		}
	}
}

// Sample measures usage once and starts or stops refusing; Run calls it
// every Interval (tests call it directly).
func (l *Limiter) Sample(now time.Time) {
	u, collected := l.usage()
	if collected {
		l.lastGC = now
	} else if l.refusing.Load() && now.Sub(l.lastGC) >= forceGCAfter && l.opt.Usage == nil {
		// Nothing new comes in, so no collection runs by itself: measure
		// the live heap again, or the refusal would never end.
		runtime.GC()
		l.lastGC = now
		u, _ = l.usage()
	}
	l.used.Store(u)
	if l.opt.SetSoft != nil {
		if s := l.SoftLimit(u); l.soft == 0 || s-l.soft > l.soft/32 || l.soft-s > l.soft/32 {
			l.soft = s
			l.opt.SetSoft(s)
		}
	}
	switch {
	case !l.refusing.Load() && u >= l.high:
		l.set(true, now)
	case l.refusing.Load() && u < l.low:
		l.set(false, now)
	}
}

// set starts or stops refusing, and logs it (at most one start line per
// LogPeriod).
func (l *Limiter) set(refuse bool, now time.Time) {
	if l.refusing.Load() == refuse {
		return
	}
	l.mu.Lock()
	if refuse {
		l.resumed = make(chan struct{})
	}
	l.refusing.Store(refuse)
	if !refuse {
		close(l.resumed)
	}
	l.mu.Unlock()
	if refuse {
		l.episodes.Add(1)
		l.started, l.startRefs = now, l.refusals.Load()
		if !l.lastLine.IsZero() && now.Sub(l.lastLine) < l.opt.LogPeriod {
			l.logged = false
			l.unreported++
			return
		}
		l.opt.Logger.Warn("memory: near the limit, receivers refuse new data (retryable) until usage falls",
			"usage_bytes", l.used.Load(), "limit_bytes", l.opt.Limit, "refuse_at_bytes", l.high, "resume_below_bytes", l.low,
			"episodes_not_logged", l.unreported)
		l.lastLine, l.logged, l.unreported = now, true, 0
		return
	}
	if l.logged {
		l.opt.Logger.Info("memory: receivers take data again",
			"usage_bytes", l.used.Load(), "limit_bytes", l.opt.Limit, "refused_for", now.Sub(l.started).Round(time.Millisecond).String(),
			"refusals", l.refusals.Load()-l.startRefs)
		l.logged = false
	}
}

// runtimeUsage reads the Go runtime's figures.
type runtimeUsage struct {
	samples []metrics.Sample
	cycles  uint64
}

// The runtime/metrics names runtimeUsage reads, in this order.
var usageMetrics = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/gc/cycles/total:gc-cycles",
}

func (r *runtimeUsage) init() {
	r.samples = make([]metrics.Sample, len(usageMetrics))
	for i, n := range usageMetrics {
		r.samples[i].Name = n
	}
}

// read returns the live heap of the last collection plus the runtime's
// memory outside the heap, and whether a collection ran since the last
// read.
func (r *runtimeUsage) read() (int64, bool) {
	metrics.Read(r.samples)
	v := func(i int) int64 {
		if r.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(r.samples[i].Value.Uint64())
	}
	live, total, released, free, objects, unused := v(0), v(1), v(2), v(3), v(4), v(5)
	outside := total - released - free - objects - unused
	cycles := uint64(v(6))
	collected := cycles != r.cycles
	r.cycles = cycles
	return live + max(outside, 0), collected
}
