package stream

import (
	"sync"
)

// outMsg is a message waiting to be published.
type outMsg struct {
	subject string
	data    []byte
	records int    // records it holds (0 for metadata and traces)
	meta    uint64 // metadata: its version (never dropped); 0 for data
}

// outbox is the bounded queue between Consume and the publisher
// goroutine: Consume never waits; what exceeds the bound is dropped.
type outbox struct {
	mu     sync.Mutex
	q      []outMsg
	bytes  int
	limit  int
	closed bool
	wake   chan struct{} // has a value when q may hold something
	room   chan struct{} // closed when q was emptied (pushWait waits on it); nil when none waits
}

func newOutbox(limit int) *outbox {
	return &outbox{limit: limit, wake: make(chan struct{}, 1)}
}

// push queues m; false when it did not fit (or the outbox is closed).
func (o *outbox) push(m outMsg) bool {
	o.mu.Lock()
	if o.closed || m.meta == 0 && o.bytes+len(m.data) > o.limit {
		o.mu.Unlock()
		return false
	}
	o.q = append(o.q, m)
	o.bytes += len(m.data)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true
}

// pushWait queues m, waiting while the outbox is full (a durable
// stream); false when the outbox is closed or stop is closed first.
func (o *outbox) pushWait(m outMsg, stop <-chan struct{}) bool {
	for {
		select {
		case <-stop:
			return false
		default:
		}
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return false
		}
		// A message larger than the bound goes into an empty outbox.
		if o.bytes == 0 || o.bytes+len(m.data) <= o.limit {
			o.q = append(o.q, m)
			o.bytes += len(m.data)
			o.mu.Unlock()
			select {
			case o.wake <- struct{}{}:
			default:
			}
			return true
		}
		if o.room == nil {
			o.room = make(chan struct{})
		}
		room := o.room
		o.mu.Unlock()
		select {
		case <-room:
		case <-stop:
			return false
		}
	}
}

// freed wakes pushWait (o.mu held).
func (o *outbox) freed() {
	if o.room != nil {
		close(o.room)
		o.room = nil
	}
}

// take moves what is queued to dst and returns it.
func (o *outbox) take(dst []outMsg) []outMsg {
	o.mu.Lock()
	dst = append(dst, o.q...)
	clear(o.q)
	o.q = o.q[:0]
	o.bytes = 0
	o.freed()
	o.mu.Unlock()
	return dst
}

// unshift puts msgs back at the front (the server went away before they
// were published).
func (o *outbox) unshift(msgs []outMsg) {
	if len(msgs) == 0 {
		return
	}
	o.mu.Lock()
	n := 0
	for _, m := range msgs {
		n += len(m.data)
	}
	o.q = append(append(make([]outMsg, 0, len(msgs)+len(o.q)), msgs...), o.q...)
	o.bytes += n
	o.mu.Unlock()
}

// len returns the number of queued messages and their bytes.
func (o *outbox) len() (int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.q), o.bytes
}

func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.freed()
	o.mu.Unlock()
}
