package store

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// CatalogMaxNames bounds each list of the catalogue: services, the
// operations of a service, the trace names of a host. Names past a bound
// are left out and the catalogue says it is incomplete.
const CatalogMaxNames = 10_000

// catalog knows the services of the stored spans (with their operations
// and span kinds) and the trace names per host, for Jaeger's
// /api/services and /api/operations and the UI's name lists. It is kept
// as traces are appended and read from the blocks' metas at open (a head
// keeps one for its block's meta), so a request only reads it. Names stay
// listed after retention removed their last trace, until the next open.
type catalog struct {
	mu    sync.RWMutex
	svcs  map[string]*catService
	names map[string]map[string]struct{} // host → trace names
	full  bool
}

type catService struct {
	ops map[OpKind]struct{}
	// viaService: some span has it as its service; viaHost: some span
	// without a service runs on a host of this name.
	viaService, viaHost bool
}

// OpKind is an operation of a service with its span kind.
type OpKind struct {
	Name string
	Kind trace.Kind
}

func newCatalog() *catalog {
	return &catalog{svcs: map[string]*catService{}, names: map[string]map[string]struct{}{}}
}

// ServiceOf is a span's service as Jaeger shows it: its service, else its
// host, else trace.UnknownService.
func ServiceOf(s *trace.Span) string {
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
	c.mu.RLock()
	var newSvc map[string]*catService
	var newOps []struct {
		svc string
		op  OpKind
	}
	// The spans of a trace repeat operations of a few services: those
	// already looked up for this trace are not looked up again, found in
	// a small table by the addresses of their strings (the assembler's
	// repeat theirs; a Kieker trace of 1,000 calls names dozens of
	// operations, each a long signature to hash in the map).
	var done [64]struct {
		svc, host, op string
		kind          trace.Kind
	}
	for i := range t.Spans {
		s := &t.Spans[i]
		x := uint64(uintptr(unsafe.Pointer(unsafe.StringData(s.Operation))))>>3 ^ uint64(len(s.Operation)) ^ uint64(s.Kind)<<7
		d := &done[(x*0x9e3779b97f4a7c15)>>58]
		if len(d.op) > 0 && sameString(d.op, s.Operation) && sameString(d.svc, s.Service) && d.kind == s.Kind && (s.Service != "" || sameString(d.host, s.Host)) {
			continue
		}
		d.svc, d.host, d.op, d.kind = s.Service, s.Host, s.Operation, s.Kind
		name := ServiceOf(s)
		var via byte = 1
		if s.Service == "" {
			via = 2
		}
		sv := c.svcs[name]
		if sv == nil || (via == 1 && !sv.viaService) || (via == 2 && !sv.viaHost) {
			if newSvc == nil {
				newSvc = map[string]*catService{}
			}
			if ns := newSvc[name]; ns != nil {
				ns.viaService, ns.viaHost = ns.viaService || via == 1, ns.viaHost || via == 2
			} else {
				newSvc[name] = &catService{viaService: via == 1, viaHost: via == 2}
			}
		}
		k := OpKind{s.Operation, s.Kind}
		if sv != nil {
			if _, ok := sv.ops[k]; ok {
				continue
			}
		}
		newOps = append(newOps, struct {
			svc string
			op  OpKind
		}{name, k})
	}
	var name, host string
	newName := false
	if r := t.Root(); r != nil {
		host, name = r.Host, t.Name()
		_, known := c.names[host][name]
		newName = !known
	}
	c.mu.RUnlock()
	if newSvc == nil && newOps == nil && !newName {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, ns := range newSvc {
		sv := c.svcs[n]
		if sv == nil {
			if len(c.svcs) >= CatalogMaxNames {
				c.full = true
				continue
			}
			sv = &catService{ops: map[OpKind]struct{}{}}
			c.svcs[strings.Clone(n)] = sv // (a trace's strings: see Store.Append)
		}
		sv.viaService = sv.viaService || ns.viaService
		sv.viaHost = sv.viaHost || ns.viaHost
	}
	for _, o := range newOps {
		sv := c.svcs[o.svc]
		if sv == nil {
			continue // over the bound
		}
		if _, ok := sv.ops[o.op]; ok {
			continue
		}
		if len(sv.ops) >= CatalogMaxNames {
			c.full = true
			continue
		}
		sv.ops[OpKind{strings.Clone(o.op.Name), o.op.Kind}] = struct{}{}
	}
	if newName {
		h := c.names[host]
		if h == nil {
			h = map[string]struct{}{}
			c.names[strings.Clone(host)] = h
		}
		if len(h) < CatalogMaxNames {
			h[strings.Clone(name)] = struct{}{}
		} else {
			c.full = true
		}
	}
}

// addMeta adds a block's part of the catalogue.
func (c *catalog) addMeta(m *block.Meta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ms := range m.Services {
		sv := c.service(ms.Name)
		if sv == nil {
			c.full = true
			continue
		}
		sv.viaService = sv.viaService || ms.ViaService
		sv.viaHost = sv.viaHost || ms.ViaHost
		for _, op := range ms.Operations {
			if len(sv.ops) >= CatalogMaxNames {
				c.full = true
				break
			}
			sv.ops[OpKind{op.Name, trace.Kind(op.Kind)}] = struct{}{}
		}
	}
	if len(m.Names) > 0 {
		h := c.names[m.Host]
		if h == nil {
			h = map[string]struct{}{}
			c.names[m.Host] = h
		}
		for _, n := range m.Names {
			if len(h) >= CatalogMaxNames {
				c.full = true
				break
			}
			h[n] = struct{}{}
		}
	}
}

// metaOf returns the catalogue as a block's meta holds it: the services
// and the trace names (a head's catalogue holds its block's only).
func (c *catalog) metaOf() ([]block.MetaService, []string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	svcs := make([]block.MetaService, 0, len(c.svcs))
	for name, sv := range c.svcs {
		ms := block.MetaService{Name: name, ViaService: sv.viaService, ViaHost: sv.viaHost}
		for op := range sv.ops {
			ms.Operations = append(ms.Operations, block.MetaOp{Name: op.Name, Kind: int(op.Kind)})
		}
		slices.SortFunc(ms.Operations, func(a, b block.MetaOp) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind)) })
		svcs = append(svcs, ms)
	}
	slices.SortFunc(svcs, func(a, b block.MetaService) int { return cmp.Compare(a.Name, b.Name) })
	var names []string
	for _, ns := range c.names {
		for n := range ns {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return svcs, slices.Compact(names)
}

// service returns the entry of a service, creating it within the bound
// (nil past it). c.mu is held.
func (c *catalog) service(name string) *catService {
	sv := c.svcs[name]
	if sv == nil && len(c.svcs) < CatalogMaxNames {
		sv = &catService{ops: map[OpKind]struct{}{}}
		c.svcs[name] = sv
	}
	return sv
}

// Services returns the services of the stored spans, sorted (a span's
// service, else its host, else trace.UnknownService).
func (s *Store) Services() []string {
	c := s.cat
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.svcs))
	for name := range c.svcs {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Operations returns a service's operations by name, then kind.
func (s *Store) Operations(service string) []OpKind {
	c := s.cat
	c.mu.RLock()
	defer c.mu.RUnlock()
	sv := c.svcs[service]
	if sv == nil {
		return nil
	}
	out := make([]OpKind, 0, len(sv.ops))
	for k := range sv.ops {
		out = append(out, k)
	}
	slices.SortFunc(out, func(x, y OpKind) int { return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.Kind, y.Kind)) })
	return out
}

// ServiceSource says how a service name occurs: as spans' service, as
// hosts of spans without one, or both (ok false: never seen).
func (s *Store) ServiceSource(service string) (viaService, viaHost, ok bool) {
	c := s.cat
	c.mu.RLock()
	defer c.mu.RUnlock()
	sv := c.svcs[service]
	if sv == nil {
		return false, false, false
	}
	return sv.viaService, sv.viaHost, true
}

// TraceNames returns the trace names (trace.Trace.Name) of the traces
// whose root runs on host ("": every host), sorted, and whether the
// catalogue is complete (no bound left a name out).
func (s *Store) TraceNames(host string) (names []string, complete bool) {
	c := s.cat
	c.mu.RLock()
	defer c.mu.RUnlock()
	set := map[string]struct{}{}
	for h, ns := range c.names {
		if host != "" && h != host {
			continue
		}
		for n := range ns {
			set[n] = struct{}{}
		}
	}
	names = make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, !c.full
}

// sameString reports whether a and b are the same bytes (not merely
// equal ones: no comparison).
func sameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b))
}
