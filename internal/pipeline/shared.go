package pipeline

import (
	"context"
	"net/http"
	"sync"

	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/jfrview"
)

// Shared holds what the components of one bridge share besides their own
// configuration, filled while the bridge is built: a component that owns
// a service publishes it through a typed setter (the trace store's sink
// the host table, SetHostDB; serve the live view, SetLive; the profile
// stage its stacks, SetProfiles) and others read it when they need it (at
// run time, not while being built, since the order in which components
// are built is not theirs to know). Services private to a few packages
// (the control settings, the embedded NATS server) live under a key of
// the owning package (Value). A nil *Shared shares nothing. The memory
// limit (SetMemory) is the exception to "read at run time": serve
// publishes it before it builds any component.
type Shared struct {
	mu       sync.RWMutex
	hosts    hostauth.Table
	hostdb   *hostdb.DB
	live     http.Handler
	profiles Profiles
	memory   Memory
	values   map[any]any
	// ackStored: receivers that answer before their data is stored
	// (OTLP) wait for it (SetAckStored).
	ackStored bool
}

// SetAckStored makes receivers that otherwise answer once the pipeline
// took their data (OTLP) answer only once every durable sink has it
// (the batches' Done callbacks): a cluster node's, whose durable sink is
// the replicated stream (internal/cluster).
func (s *Shared) SetAckStored(on bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.ackStored = on
	s.mu.Unlock()
}

// AckStored reports SetAckStored's setting.
func (s *Shared) AckStored() bool {
	if s == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ackStored
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

// SetHostDB publishes the host table (serve opens it): its records for
// the store sink and the HTTP API, and host authentication over them
// (Hosts) for the receivers.
func (s *Shared) SetHostDB(db *hostdb.DB) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.hostdb = db
	s.hosts = db.Auth()
	s.mu.Unlock()
}

// HostDB returns the host table, or nil when the bridge has none.
func (s *Shared) HostDB() *hostdb.DB {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hostdb
}

// Hosts returns host authentication, or nil when the bridge has none.
func (s *Shared) Hosts() hostauth.Table {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hosts
}

// SetLive publishes the live view's WebSocket handler (the top-level
// stream's), which the HTTP API mounts at /api/live.
func (s *Shared) SetLive(h http.Handler) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.live = h
	s.mu.Unlock()
}

// Live returns the live view's handler, or nil when the bridge has none.
func (s *Shared) Live() http.Handler {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.live
}

// Profiles gives the stacks a profile stage kept (JFR's execution
// samples, allocations, lock waits, I/O, exceptions), for the HTTP API's
// flame graphs.
type Profiles interface {
	// Stacks returns the stacks of a kind (a flame.Kinds name; "" is
	// cpu) on host between since and until (unix ns), merged and
	// weighed; nil without samples there; an error for an unknown kind.
	Stacks(ctx context.Context, kind, host string, since, until int64) (*flame.Stacks, error)
	// Views returns what JMC's views show of host between since and
	// until (garbage collections, heap after GC, contended monitors, the
	// slowest I/O, exceptions by class); nil when there is nothing.
	Views(ctx context.Context, host string, since, until int64) (*jfrview.Views, error)
}

// SetProfiles publishes the profile stage's stacks. Publishing again
// replaces them.
func (s *Shared) SetProfiles(p Profiles) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.profiles = p
	s.mu.Unlock()
}

// Profiles returns the profile stage's stacks, or nil when the bridge has
// no profile stage.
func (s *Shared) Profiles() Profiles {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.profiles
}

// Memory is the process's memory limit as the receivers ask it
// (internal/memlimit): whether to take new data now, or to answer with
// their protocol's retryable refusal (OTLP 429 / RESOURCE_EXHAUSTED, ZICO
// INTERNAL_ERROR) or stop reading (TCP, brokers) until it takes data
// again. Both methods are cheap and safe for concurrent use; a receiver
// asks once per request, message or read, never per record.
type Memory interface {
	// Admit reports whether new data may come in now; false counts a
	// refusal.
	Admit() bool
	// Wait returns once new data may come in (at once when it may), or
	// with ctx's error.
	Wait(ctx context.Context) error
	// Budget is the memory the Go runtime aims to stay within (0: no
	// limit): the memory target's share when one is set, else the
	// limit's. Components size their caches within a share of it.
	Budget() int64
}

// unlimited is the Memory of a bridge without a limit.
type unlimited struct{}

func (unlimited) Admit() bool                    { return true }
func (unlimited) Wait(ctx context.Context) error { return nil }
func (unlimited) Budget() int64                  { return 0 }

// SetMemory publishes the memory limit.
func (s *Shared) SetMemory(m Memory) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.memory = m
	s.mu.Unlock()
}

// Memory returns the memory limit; never nil: without one, a Memory that
// always admits.
func (s *Shared) Memory() Memory {
	if s == nil {
		return unlimited{}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.memory == nil {
		return unlimited{}
	}
	return s.memory
}
