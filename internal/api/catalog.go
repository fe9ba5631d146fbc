package api

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// The catalogue's bounds and timing.
const (
	catalogEvery    = 5 * time.Second // at most one refresh per
	catalogBudget   = 3 * time.Second // time a refresh may take
	catalogFirst    = 20_000          // traces the first refresh reads, newest first
	catalogOverlap  = time.Minute     // traces may reach the store this late
	catalogMaxNames = 10_000          // services, operations per service, names per host
	catalogPage     = 1000            // traces per search page
	catalogMaxSeen  = 1_000_000       // ids remembered in the overlap
)

// catalog knows the services, their operations (with span kinds) and the
// trace names (trace.Trace.Name per host) of the stored traces, for
// Jaeger's /api/services and /api/operations and the UI's name lists.
// The store indexes none of these, so the catalogue reads traces: at
// first the newest catalogFirst, then every trace that arrives (traces
// that start more than catalogOverlap before the newest one seen when
// they reach the store, which only traces longer than that do, are
// missed). It is refreshed on use, at most every catalogEvery.
type catalog struct {
	mu    sync.Mutex
	st    *store.Store // the store the catalogue describes
	last  time.Time
	hw    int64 // the newest trace start read
	seen  map[trace.ID]int64
	svcs  map[string]*service
	names map[string]map[string]struct{}
	// full: a bound was reached, some names are left out.
	full bool
}

type service struct {
	ops map[opKind]struct{}
	// viaService: some span has it as its service; viaHost: some span
	// without a service runs on a host of this name.
	viaService, viaHost bool
}

type opKind struct {
	name string
	kind trace.Kind
}

// serviceOf is a span's service as Jaeger shows it: its service, else its
// host.
func serviceOf(s *trace.Span) string {
	if s.Service != "" {
		return s.Service
	}
	if s.Host != "" {
		return s.Host
	}
	return trace.UnknownService
}

// add records a trace.
func (c *catalog) add(t *trace.Trace) {
	for i := range t.Spans {
		s := &t.Spans[i]
		name := serviceOf(s)
		sv := c.svcs[name]
		if sv == nil {
			if len(c.svcs) >= catalogMaxNames {
				c.full = true
				continue
			}
			sv = &service{ops: map[opKind]struct{}{}}
			c.svcs[name] = sv
		}
		if s.Service != "" {
			sv.viaService = true
		} else {
			sv.viaHost = true
		}
		k := opKind{s.Operation, s.Kind}
		if _, ok := sv.ops[k]; !ok {
			if len(sv.ops) >= catalogMaxNames {
				c.full = true
			} else {
				sv.ops[k] = struct{}{}
			}
		}
	}
	if r := t.Root(); r != nil {
		h := c.names[r.Host]
		if h == nil {
			h = map[string]struct{}{}
			c.names[r.Host] = h
		}
		if len(h) < catalogMaxNames {
			h[t.Name()] = struct{}{}
		} else {
			c.full = true
		}
	}
}

// refresh reads what arrived since the last refresh.
func (c *catalog) refresh(st *store.Store, now time.Time) error {
	if c.st != st { // a new store (or the first): start afresh
		c.st, c.last, c.hw, c.full = st, time.Time{}, 0, false
		c.seen, c.svcs, c.names = map[trace.ID]int64{}, map[string]*service{}, map[string]map[string]struct{}{}
	}
	if !c.last.IsZero() && now.Sub(c.last) < catalogEvery {
		return nil
	}
	first := c.last.IsZero()
	c.last = now
	deadline := time.Now().Add(catalogBudget)
	q := store.Query{Limit: catalogPage}
	if !first {
		q.Oldest = true
		q.Since = c.hw - int64(catalogOverlap)
	}
	read := 0
	for {
		rem := time.Until(deadline)
		if rem <= 0 {
			break
		}
		q.TotalBudget, q.HitBudget = rem, rem
		page, err := st.Search(q)
		if err != nil {
			return err
		}
		for _, s := range page.Traces {
			if _, ok := c.seen[s.ID]; ok || time.Now().After(deadline) {
				continue
			}
			t, err := st.Get(s.ID)
			if err != nil {
				continue // gone (retention) or unreadable: the next one
			}
			c.add(t)
			read++
			if s.Start >= c.hw-int64(catalogOverlap) && len(c.seen) < catalogMaxSeen {
				c.seen[s.ID] = s.Start
			}
			c.hw = max(c.hw, s.Start)
		}
		if !page.More || page.Cursor == "" || first && read >= catalogFirst {
			break
		}
		q.Cursor = page.Cursor
	}
	for id, start := range c.seen {
		if start < c.hw-int64(catalogOverlap) {
			delete(c.seen, id)
		}
	}
	return nil
}

// services returns the services, sorted, refreshing first.
func (a *API) services(st *store.Store) []string {
	a.cat.mu.Lock()
	defer a.cat.mu.Unlock()
	a.cat.refresh(st, a.opt.Now())
	out := make([]string, 0, len(a.cat.svcs))
	for name := range a.cat.svcs {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// operations returns a service's operations by name and kind.
func (a *API) operations(st *store.Store, svc string) []opKind {
	a.cat.mu.Lock()
	defer a.cat.mu.Unlock()
	a.cat.refresh(st, a.opt.Now())
	sv := a.cat.svcs[svc]
	if sv == nil {
		return nil
	}
	out := make([]opKind, 0, len(sv.ops))
	for k := range sv.ops {
		out = append(out, k)
	}
	slices.SortFunc(out, func(x, y opKind) int { return cmp.Or(cmp.Compare(x.name, y.name), cmp.Compare(x.kind, y.kind)) })
	return out
}

// serviceSource says how a service name occurs: as spans' service, as
// hosts of spans without one, or both (ok false: not seen).
func (a *API) serviceSource(st *store.Store, svc string) (viaService, viaHost, ok bool) {
	a.cat.mu.Lock()
	defer a.cat.mu.Unlock()
	a.cat.refresh(st, a.opt.Now())
	sv := a.cat.svcs[svc]
	if sv == nil {
		return false, false, false
	}
	return sv.viaService, sv.viaHost, true
}

// Names are the trace names (trace.Trace.Name) and services seen.
type Names struct {
	Names    []string `json:"names"`
	Services []string `json:"services"`
	// Operations are the operations of the service asked for (by name,
	// each once; left out without service).
	Operations []string `json:"operations,omitempty"`
	// Complete is false when a bound left names out.
	Complete bool `json:"complete"`
}

func names(c *call, st *store.Store) error {
	host, svc := c.str("host"), c.str("service")
	if err := c.check(); err != nil {
		return err
	}
	svcs := c.a.services(st)
	var ops []string
	if svc != "" {
		ops = []string{}
		for _, op := range c.a.operations(st, svc) {
			if len(ops) == 0 || ops[len(ops)-1] != op.name {
				ops = append(ops, op.name)
			}
		}
	}
	c.a.cat.mu.Lock()
	set := map[string]struct{}{}
	for h, ns := range c.a.cat.names {
		if host != "" && h != host {
			continue
		}
		for n := range ns {
			set[n] = struct{}{}
		}
	}
	full := c.a.cat.full
	c.a.cat.mu.Unlock()
	out := Names{Names: make([]string, 0, len(set)), Services: svcs, Operations: ops, Complete: !full}
	for n := range set {
		out.Names = append(out.Names, n)
	}
	slices.Sort(out.Names)
	return c.json(out)
}
