package store

import (
	"cmp"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// CatalogMaxNames bounds each list of the catalogue: services, the
// operations of a service, the trace names of a host. Names past a bound
// are left out and the catalogue says it is incomplete.
const CatalogMaxNames = 10_000

// catalog knows the services of the stored spans (with their operations
// and span kinds) and the trace names per host, for Jaeger's
// /api/services and /api/operations and the UI's name lists. It is kept
// as traces are appended (and indexed again by recovery and rebuild) and
// persisted in the index under 'C' keys, so a request only reads it.
// Names stay listed after retention removed their last trace.
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

// Catalogue keys: 'C', a sub-kind, then strings (uvarint length, bytes).
//
//	'C' 's' service         → one byte: 1 via service, 2 via host
//	'C' 'o' service op kind → (empty); kind is one byte (trace.Kind)
//	'C' 'n' host name       → (empty)
const kCatalog = 'C'

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

// add records a trace; what is new goes into batch (nil: not persisted).
// Called by the writer only, so reads of the maps need no lock here.
func (c *catalog) add(t *trace.Trace, batch *pebble.Batch) {
	var newSvc map[string]*catService
	var newOps []struct {
		svc string
		op  OpKind
	}
	for i := range t.Spans {
		s := &t.Spans[i]
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
			c.svcs[n] = sv
		}
		sv.viaService = sv.viaService || ns.viaService
		sv.viaHost = sv.viaHost || ns.viaHost
		if batch != nil {
			var v byte
			if sv.viaService {
				v |= 1
			}
			if sv.viaHost {
				v |= 2
			}
			batch.Set(catKey('s', n), []byte{v}, nil)
		}
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
		sv.ops[o.op] = struct{}{}
		if batch != nil {
			batch.Set(append(catKey('o', o.svc, o.op.Name), byte(o.op.Kind)), nil, nil)
		}
	}
	if newName {
		h := c.names[host]
		if h == nil {
			h = map[string]struct{}{}
			c.names[host] = h
		}
		if len(h) < CatalogMaxNames {
			h[name] = struct{}{}
			if batch != nil {
				batch.Set(catKey('n', host, name), nil, nil)
			}
		} else {
			c.full = true
		}
	}
}

func catKey(sub byte, parts ...string) []byte {
	k := []byte{kCatalog, sub}
	for _, p := range parts {
		k = binary.AppendUvarint(k, uint64(len(p)))
		k = append(k, p...)
	}
	return k
}

// catParts splits a catalogue key's strings (after its two bytes); the
// bytes after the last string are returned as rest.
func catParts(k []byte, n int) (parts []string, rest []byte, ok bool) {
	p := k
	for range n {
		l, w := binary.Uvarint(p)
		if w <= 0 || uint64(len(p)-w) < l {
			return nil, nil, false
		}
		parts = append(parts, string(p[w:w+int(l)]))
		p = p[w+int(l):]
	}
	return parts, p, true
}

// load reads the persisted catalogue.
func (c *catalog) load(db *pebble.DB) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{kCatalog}, UpperBound: []byte{kCatalog + 1}})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < 2 {
			continue
		}
		switch k[1] {
		case 's':
			v := it.Value()
			parts, rest, ok := catParts(k[2:], 1)
			if !ok || len(rest) != 0 || len(v) != 1 {
				continue
			}
			sv := c.service(parts[0])
			if sv == nil {
				continue
			}
			sv.viaService = sv.viaService || v[0]&1 != 0
			sv.viaHost = sv.viaHost || v[0]&2 != 0
		case 'o':
			parts, rest, ok := catParts(k[2:], 2)
			if !ok || len(rest) != 1 {
				continue
			}
			if sv := c.service(parts[0]); sv != nil && len(sv.ops) < CatalogMaxNames {
				sv.ops[OpKind{parts[1], trace.Kind(rest[0])}] = struct{}{}
			}
		case 'n':
			parts, rest, ok := catParts(k[2:], 2)
			if !ok || len(rest) != 0 {
				continue
			}
			h := c.names[parts[0]]
			if h == nil {
				h = map[string]struct{}{}
				c.names[parts[0]] = h
			}
			if len(h) < CatalogMaxNames {
				h[parts[1]] = struct{}{}
			}
		}
	}
	return it.Close()
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
