package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// expiries follows a key-value bucket whose entries expire (the leases,
// the heartbeats) through a watcher, to tell when a key has expired
// without asking the bucket: an entry expires TTL after the server
// stored it (its timestamp, stored). It is a hint for taking leases
// sooner, never a reason to own anything: a lease is only ever taken by
// the bucket's create (absent keys only) or revision-checked update, so
// a hint too early costs a create that fails, one too late a takeover
// later.
type expiries struct {
	ttl time.Duration

	mu   sync.Mutex
	at   map[string]time.Time // key → when its last put was received
	last time.Time            // when the watcher last delivered anything
}

func newExpiries(ttl time.Duration) *expiries {
	return &expiries{ttl: ttl, at: map[string]time.Time{}}
}

// follow watches kv until ctx ends, making the watcher again when it
// fails.
func (x *expiries) follow(ctx context.Context, kv jetstream.KeyValue) {
	for ctx.Err() == nil {
		w, err := kv.WatchAll(ctx)
		if err == nil {
			x.read(ctx, w)
			_ = w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (x *expiries) read(ctx context.Context, w jetstream.KeyWatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			x.saw(e, time.Now())
		}
	}
}

// saw records an entry received at now (nil: the end of the initial
// values).
func (x *expiries) saw(e jetstream.KeyValueEntry, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.last = now
	if e == nil {
		return
	}
	if e.Operation() == jetstream.KeyValuePut {
		x.at[e.Key()] = stored(e.Created(), now, x.ttl/4)
	} else {
		delete(x.at, e.Key())
	}
}

// fresh reports whether the watcher delivered something within d.
func (x *expiries) fresh(now time.Time, d time.Duration) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return !x.last.IsZero() && now.Sub(x.last) < d
}

// gone reports whether key is absent or has expired by now.
func (x *expiries) gone(key string, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	at, ok := x.at[key]
	return !ok || !now.Before(at.Add(x.ttl))
}

// alive counts the keys not expired by now.
func (x *expiries) alive(now time.Time) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := 0
	for _, at := range x.at {
		if now.Before(at.Add(x.ttl)) {
			k++
		}
	}
	return k
}

// recent reports whether key's last put was received within d.
func (x *expiries) recent(key string, now time.Time, d time.Duration) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	at, ok := x.at[key]
	return ok && now.Sub(at) < d
}

// stored is when the server stored an entry received at now: its
// timestamp (the server's clock), but never after now, nor more than
// slack before it (a watcher behind by seconds on a busy machine is
// believed; a server clock far behind this node's is not).
func stored(created, now time.Time, slack time.Duration) time.Time {
	switch {
	case created.After(now):
		return now
	case created.Before(now.Add(-slack)):
		return now.Add(-slack)
	}
	return created
}
