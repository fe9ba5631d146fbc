package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// SourceState is what a receiver is doing.
type SourceState string

// The states.
const (
	Running SourceState = "running"
	Stopped SourceState = "stopped" // by StopSource
	Ended   SourceState = "ended"   // Run returned by itself
	Failed  SourceState = "failed"  // Run returned an error
	Pending SourceState = "pending" // added, the engine not running yet
)

// SourceStatus describes a receiver.
type SourceStatus struct {
	Name  string      `json:"name"`
	State SourceState `json:"state"`
	Since time.Time   `json:"since"`
	Err   string      `json:"error,omitempty"`
}

// runningSource is one receiver's goroutine.
type runningSource struct {
	name   string
	src    pipeline.Source
	cancel context.CancelFunc
	done   chan struct{}
	state  SourceState
	err    error
	since  time.Time
}

// sourceSet runs the receivers of a running engine: they may be stopped
// and started while it runs (the console). The engine ends by itself when
// every receiver has ended by itself (a single-connection server's
// connection closed) and none was stopped on purpose.
type sourceSet struct {
	e       *Engine
	ctx     context.Context
	cancel  context.CancelFunc
	q       *pipeline.Queue
	aborted *atomic.Bool

	mu       sync.Mutex
	list     []*runningSource
	running  int
	stopped  int // stopped on purpose and not started again
	firstErr error
	ended    chan struct{} // closed once all ended by themselves
	closed   bool
	wg       sync.WaitGroup
}

func newSourceSet(e *Engine, ctx context.Context, cancel context.CancelFunc, q *pipeline.Queue, aborted *atomic.Bool) *sourceSet {
	return &sourceSet{e: e, ctx: ctx, cancel: cancel, q: q, aborted: aborted, ended: make(chan struct{})}
}

// start runs src under name. The lock is held.
func (s *sourceSet) start(name string, src pipeline.Source) {
	ctx, cancel := context.WithCancel(s.ctx)
	rs := &runningSource{name: name, src: src, cancel: cancel, done: make(chan struct{}), state: Running, since: time.Now()}
	replaced := false
	for i, o := range s.list {
		if o.name == name {
			if o.state == Stopped {
				s.stopped--
			}
			s.list[i] = rs
			replaced = true
		}
	}
	if !replaced {
		s.list = append(s.list, rs)
	}
	s.running++
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(rs.done)
		err := src.Run(ctx, stamp{q: s.q, name: name})
		if errors.Is(err, pipeline.ErrClosed) && s.aborted.Load() {
			err = nil // the shutdown timeout aborted the queue; logged there
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.running--
		rs.since = time.Now()
		switch {
		case rs.state == Stopped:
		case err != nil && !errors.Is(err, context.Canceled):
			rs.state, rs.err = Failed, err
			if s.firstErr == nil {
				s.firstErr = fmt.Errorf("receiver %s: %w", name, err)
			}
			s.cancel() // one failing receiver ends the bridge
		default:
			rs.state = Ended
		}
		if s.running == 0 && s.stopped == 0 && !s.closed {
			s.closed = true
			close(s.ended)
		}
	}()
}

// stop cancels a receiver and waits up to timeout for it to drain.
func (s *sourceSet) stop(name string, timeout time.Duration) error {
	s.mu.Lock()
	var rs *runningSource
	for _, o := range s.list {
		if o.name == name {
			rs = o
		}
	}
	if rs == nil {
		s.mu.Unlock()
		return fmt.Errorf("no receiver %s", name)
	}
	if rs.state != Running {
		s.mu.Unlock()
		return fmt.Errorf("receiver %s is %s", name, rs.state)
	}
	rs.state = Stopped
	s.stopped++
	s.mu.Unlock()
	rs.cancel()
	select {
	case <-rs.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("receiver %s: still draining after %v", name, timeout)
	}
}

func (s *sourceSet) statuses() []SourceStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SourceStatus, 0, len(s.list))
	for _, rs := range s.list {
		st := SourceStatus{Name: rs.name, State: rs.state, Since: rs.since}
		if rs.err != nil {
			st.Err = rs.err.Error()
		}
		out = append(out, st)
	}
	return out
}

func (s *sourceSet) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstErr
}

// StartSource runs a receiver: while the engine runs it starts at once
// (replacing a stopped or ended one of the same name); before Run it is
// added as AddSource does.
func (e *Engine) StartSource(name string, src pipeline.Source) error {
	e.smu.Lock()
	set := e.running
	if set == nil {
		e.smu.Unlock()
		e.AddSource(name, src)
		return nil
	}
	e.smu.Unlock()
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.ctx.Err() != nil {
		return errors.New("bridge: stopping")
	}
	for _, o := range set.list {
		if o.name == name && o.state == Running {
			return fmt.Errorf("receiver %s is running", name)
		}
	}
	set.start(name, src)
	return nil
}

// StopSource stops a running receiver (it drains what its peers already
// sent, for at most the shutdown timeout) without ending the engine.
func (e *Engine) StopSource(name string) error {
	e.smu.Lock()
	set := e.running
	e.smu.Unlock()
	if set == nil {
		return errors.New("bridge: not running")
	}
	return set.stop(name, e.set.ShutdownTimeout)
}

// Sources describes the receivers.
func (e *Engine) Sources() []SourceStatus {
	e.smu.Lock()
	set := e.running
	e.smu.Unlock()
	if set != nil {
		return set.statuses()
	}
	var out []SourceStatus
	for _, s := range e.sources {
		out = append(out, SourceStatus{Name: s.name, State: Pending})
	}
	return out
}
