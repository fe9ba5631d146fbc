package profile

import (
	"context"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/jfrevents"
	"github.com/tracebridge/tracebridge/internal/jfrview"
)

// DefaultHistory is how long a host's samples stay in the history that
// flame graphs of a host and time window read (Options.History).
const DefaultHistory = time.Hour

const (
	// historyStacks bounds the distinct stacks of one host's minute;
	// samples of more are counted as flame.Other.
	historyStacks = 20_000
	// historySkew is how far ahead of the wall clock a sample may be:
	// one further ahead (a skewed clock, a damaged recording) is not
	// kept, or it would push every real sample out of the window.
	historySkew = 5 * time.Minute
)

// history keeps, per host and minute, how often each stack was sampled:
// what the HTTP API's flame graphs of a host and time window read (the
// Stacks method of Stage, api.Profiles). The rings of the stage serve
// spans and keep minutes; this keeps an hour at a minute's resolution,
// as counts per interned stack (16 bytes and a map entry per distinct
// stack and minute; the frames are the stage's).
//
// The window follows the newest minute seen across all hosts, so that
// a recording read from its beginning is kept like a live one; a host
// whose newest minute falls out of the window is forgotten.
type history struct {
	keep int64 // minutes
	now  func() time.Time

	mu      sync.Mutex
	hosts   map[string]*hostHistory
	newest  int64 // the newest minute of any host
	ahead   int64 // samples not kept: too far ahead of the clock
	evicted int64 // hosts forgotten
}

type hostHistory struct {
	minutes map[int64]map[*stack]int64 // unix minute → samples per stack
	newest  int64                      // the host's newest minute
}

func newHistory(keep time.Duration, now func() time.Time) *history {
	return &history{keep: max(int64(keep/time.Minute), 1), now: now, hosts: map[string]*hostHistory{}}
}

// add counts one sample of host at t (unix ns) with weight n. It does
// not allocate for a stack already counted in the minute.
func (h *history) add(host string, t int64, st *stack, n int64) {
	m := t / int64(time.Minute)
	h.mu.Lock()
	defer h.mu.Unlock()
	if m > h.newest {
		if t > h.now().Add(historySkew).UnixNano() {
			h.ahead++
			return
		}
		h.newest = m
		h.forget()
	}
	if m <= h.newest-h.keep {
		return // older than what is kept
	}
	hh := h.hosts[host]
	if hh == nil {
		hh = &hostHistory{minutes: map[int64]map[*stack]int64{}, newest: m}
		h.hosts[host] = hh
	}
	if m > hh.newest {
		hh.newest = m
	}
	counts := hh.minutes[m]
	if counts == nil {
		counts = map[*stack]int64{}
		hh.minutes[m] = counts
	}
	if _, ok := counts[st]; ok || len(counts) < historyStacks {
		counts[st] += n
	} else {
		counts[otherStack] += n
	}
}

// otherStack counts the samples of a minute beyond historyStacks.
var otherStack = &stack{frames: []string{flame.Other}}

// forget drops the minutes (and the hosts) that fell out of the window.
func (h *history) forget() {
	oldest := h.newest - h.keep
	for name, hh := range h.hosts {
		if hh.newest <= oldest {
			delete(h.hosts, name)
			h.evicted++
			continue
		}
		for k := range hh.minutes {
			if k <= oldest {
				delete(hh.minutes, k)
			}
		}
	}
}

type stackCount struct {
	st *stack
	n  int64
}

// stacks merges the minutes of host that overlap [since, until] (unix
// ns); nil when there are none. The counts are copied a minute at a time
// under the lock and merged outside it, so that a request does not hold
// up the samples arriving.
func (h *history) stacks(ctx context.Context, host string, since, until int64) (*flame.Stacks, error) {
	first, last := since/int64(time.Minute), until/int64(time.Minute)
	h.mu.Lock()
	hh := h.hosts[host]
	var minutes []int64
	if hh != nil {
		for m := range hh.minutes {
			if m >= first && m <= last {
				minutes = append(minutes, m)
			}
		}
	}
	h.mu.Unlock()
	var out *flame.Stacks
	var pairs []stackCount
	for _, m := range minutes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pairs = pairs[:0]
		h.mu.Lock()
		for st, n := range hh.minutes[m] { // a forgotten minute is nil: none
			pairs = append(pairs, stackCount{st, n})
		}
		h.mu.Unlock()
		if len(pairs) > 0 && out == nil {
			out = &flame.Stacks{}
		}
		for _, p := range pairs {
			out.AddLeafFirst(p.st.frames, nil, p.n)
		}
	}
	return out, nil
}

// Stacks returns the stacks of a flame graph kind (flame.Kinds; "" is
// cpu: the samples of Options.Types) on host between since and until
// (unix ns, to the minute), weighed as the kind says and merged over the
// JVMs of the host; nil when there were none. It may be called from any
// goroutine (api.Profiles).
func (s *Stage) Stacks(ctx context.Context, kind, host string, since, until int64) (*flame.Stacks, error) {
	if kind == "" || kind == "cpu" {
		return s.hist.stacks(ctx, host, since, until)
	}
	for i, k := range flame.Kinds {
		if k.Name == kind && s.hists[i] != nil {
			return s.hists[i].stacks(ctx, host, since, until)
		}
	}
	_, err := flame.KindOf(kind)
	return nil, err
}

// Views returns the JMC views (garbage collections, heap after GC,
// contended monitors, the slowest I/O, exceptions by class) of host
// between since and until (unix ns); nil when there is nothing. It may be
// called from any goroutine (api.Profiles).
func (s *Stage) Views(ctx context.Context, host string, since, until int64) (*jfrview.Views, error) {
	return s.views.Views(ctx, host, since, until)
}

// Events returns the event browser's window of recent JFR events
// (GET /api/v1/jfr/…); safe for concurrent use.
func (s *Stage) Events() *jfrevents.Keeper { return s.events }
