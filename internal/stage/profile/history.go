package profile

import (
	"context"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/flame"
)

// DefaultHistory is how long a host's samples stay in the history that
// flame graphs of a host and time window read (Options.History).
const DefaultHistory = time.Hour

// historyStacks bounds the distinct stacks of one host's minute; more
// are counted as flame.Other.
const historyStacks = 20_000

// history keeps, per host and minute, the stacks sampled then: what
// the HTTP API's flame graphs of a host and time window read (the
// Stacks method of Stage, api.Profiles). The rings of the stage serve
// spans and keep minutes; this keeps an hour at a minute's resolution,
// as counts per distinct stack, not samples.
type history struct {
	keep time.Duration

	mu    sync.Mutex
	hosts map[string]*hostHistory
}

type hostHistory struct {
	minutes map[int64]*flame.Stacks // unix minute → stacks
	newest  int64                   // the newest minute
}

func newHistory(keep time.Duration) *history {
	return &history{keep: keep, hosts: map[string]*hostHistory{}}
}

// add counts one sample of host at t (unix ns) with its stack, top frame
// first. A known stack in a known minute does not allocate.
func (h *history) add(host string, t int64, topFirst []string) {
	m := t / int64(time.Minute)
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil {
		hh = &hostHistory{minutes: map[int64]*flame.Stacks{}, newest: m}
		h.hosts[host] = hh
	}
	if m > hh.newest {
		hh.newest = m
		oldest := m - int64(h.keep/time.Minute)
		for k := range hh.minutes {
			if k < oldest {
				delete(hh.minutes, k)
			}
		}
	} else if m < hh.newest-int64(h.keep/time.Minute) {
		return // older than what is kept
	}
	st := hh.minutes[m]
	if st == nil {
		st = &flame.Stacks{MaxStacks: historyStacks}
		hh.minutes[m] = st
	}
	st.AddLeafFirst(topFirst, nil, 1)
}

// stacks merges the minutes of host that overlap [since, until] (unix
// ns); nil when there are none.
func (h *history) stacks(ctx context.Context, host string, since, until int64) (*flame.Stacks, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil {
		return nil, nil
	}
	var out *flame.Stacks
	first, last := since/int64(time.Minute), until/int64(time.Minute)
	for m, st := range hh.minutes {
		if m < first || m > last {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if out == nil {
			out = &flame.Stacks{}
		}
		out.Merge(st)
	}
	return out, nil
}

// Stacks returns the stacks sampled on host between since and until
// (unix ns, to the minute), merged over the JVMs of the host; nil when
// none were. It may be called from any goroutine (api.Profiles).
func (s *Stage) Stacks(ctx context.Context, host string, since, until int64) (*flame.Stacks, error) {
	return s.hist.stacks(ctx, host, since, until)
}
