package pipeline

import (
	"sync"

	"github.com/tracebridge/tracebridge/internal/hostauth"
)

// Shared holds what the components of one bridge share besides their own
// configuration, filled while the bridge is built: a component that owns
// a service publishes it (the trace store publishes its host table) and
// others look it up when they need it (at run time, not while being
// built, since the order in which components are built is not theirs to
// know). A nil *Shared shares nothing.
type Shared struct {
	mu     sync.RWMutex
	hosts  hostauth.Table
	values map[any]any
}

// Value returns the service shared under key (an unexported type of the
// package that owns the service, as context keys are), making it with mk
// the first time; with a nil mk it only looks (nil when there is none).
// A nil *Shared shares nothing: it returns mk() (or nil) every time.
func (s *Shared) Value(key any, mk func() any) any {
	if s == nil {
		if mk == nil {
			return nil
		}
		return mk()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.values[key]; ok || mk == nil {
		return v
	}
	if s.values == nil {
		s.values = map[any]any{}
	}
	v := mk()
	s.values[key] = v
	return v
}

// SetHosts publishes the host table.
func (s *Shared) SetHosts(h hostauth.Table) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.hosts = h
	s.mu.Unlock()
}

// Hosts returns the host table, or nil when the bridge has none.
func (s *Shared) Hosts() hostauth.Table {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hosts
}

// Publish makes a service of a component available under a name, for
// the parts of the bridge that serve people (the HTTP API). The names the
// API looks up: "live" (an http.Handler mounted at /api/live, the live
// view's WebSocket) and "profiles" (an api.Profiles: flame graphs of
// sampled stacks). Publishing a name again replaces the service.
func (s *Shared) Publish(name string, service any) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[any]any{}
	}
	s.values[name] = service
}

// Lookup returns the service published under name, or nil.
func (s *Shared) Lookup(name string) any {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.values[name]
}
