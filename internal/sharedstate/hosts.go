package sharedstate

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/lograte"
)

// hostPrefix starts every key of the hosts bucket: "h." + the name in
// base64url.
const hostPrefix = "h."

// hostSync replicates the host table (see the package comment).
type hostSync struct {
	o      Options
	db     *hostdb.DB
	bucket jetstream.KeyValue
	log    *slog.Logger
	faults lograte.Limiter // unreadable records of the bucket
	// writes: writing changes to the bucket fails on every try while
	// the node is cut off from the cluster; logged once when it starts
	// and once when it ends.
	writes lograte.Outage

	// known is the bucket's record and revision of each host, as last
	// seen or written (touched by the loop's goroutine only).
	known map[string]knownHost

	mu      sync.Mutex // guards pending (the table's hook adds to it)
	pending map[string]bool
	signal  chan struct{}
}

type knownHost struct {
	h   hostdb.Host
	rev uint64
	// gone: this node deleted the host at a revision after rev (its
	// older entries, still on their way back, are not applied).
	gone bool
}

func newHostSync(o Options, kv jetstream.KeyValue) *hostSync {
	hs := &hostSync{o: o, db: o.Hosts, bucket: kv, log: o.Logger, faults: lograte.Limiter{PerSecond: 1},
		known: map[string]knownHost{}, pending: map[string]bool{}, signal: make(chan struct{}, 1)}
	// Registered before the bucket is read, so no local change is missed.
	hs.db.OnChange(hs.changed)
	return hs
}

func (hs *hostSync) kv() jetstream.KeyValue { return hs.bucket }
func (hs *hostSync) name() string           { return HostsBucket }
func (hs *hostSync) wake() <-chan struct{}  { return hs.signal }
func (hs *hostSync) changed(name string)    { hs.queue(name) }
func (hs *hostSync) isPending(name string) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.pending[name]
}

// queue notes that host name changed locally (called with the host table
// locked: it only queues).
func (hs *hostSync) queue(name string) {
	hs.mu.Lock()
	hs.pending[name] = true
	hs.mu.Unlock()
	select {
	case hs.signal <- struct{}{}:
	default:
	}
}

func (hs *hostSync) unqueue(name string) {
	hs.mu.Lock()
	delete(hs.pending, name)
	hs.mu.Unlock()
}

// replicated is what the bucket holds of a host: the record without its
// last contact.
func replicated(h hostdb.Host) hostdb.Host {
	h.LastContact = time.Time{}
	return h
}

func (hs *hostSync) initial(ctx context.Context, entries []jetstream.KeyValueEntry) {
	deleted := map[string]bool{}
	for _, e := range entries {
		name, ok := keyName(hostPrefix, e.Key())
		if !ok {
			continue
		}
		if e.Operation() != jetstream.KeyValuePut {
			deleted[name] = true
			continue
		}
		h, ok := hs.decode(e, name)
		if !ok {
			continue
		}
		hs.known[name] = knownHost{h: h, rev: e.Revision()}
	}
	added, removed, seeded := 0, 0, 0
	for name, k := range hs.known {
		if changed, err := hs.db.Apply(k.h); err != nil {
			hs.log.Error("shared state: applying a host record of the cluster failed", "host", name, "err", err)
		} else if changed {
			added++
		}
		hs.unqueue(name)
	}
	for _, h := range hs.db.Hosts() {
		switch {
		case deleted[h.Name]:
			if gone, err := hs.db.Remove(h.Name); err != nil {
				hs.log.Error("shared state: removing a host deleted in the cluster failed", "host", h.Name, "err", err)
			} else if gone {
				removed++
			}
			hs.unqueue(h.Name)
		case hs.known[h.Name].rev == 0:
			hs.queue(h.Name) // the cluster never had it: seed it
			seeded++
		}
	}
	hs.log.Info("shared state: host table in sync with the cluster", "bucket", HostsBucket, "hosts", len(hs.known), "taken", added, "removed", removed, "seeded", seeded)
}

// decode reads a host record of the bucket.
func (hs *hostSync) decode(e jetstream.KeyValueEntry, name string) (hostdb.Host, bool) {
	var h hostdb.Host
	if err := json.Unmarshal(e.Value(), &h); err != nil || h.Name != name {
		if n, ok := hs.faults.Allow(); ok {
			hs.log.Warn("shared state: a host record of the bucket is unreadable, ignored", "bucket", HostsBucket, "key", e.Key(), "revision", e.Revision(), "err", err, "suppressed", n)
		}
		return hostdb.Host{}, false
	}
	return h, true
}

func (hs *hostSync) remote(_ context.Context, e jetstream.KeyValueEntry) {
	name, ok := keyName(hostPrefix, e.Key())
	if !ok || e.Revision() <= hs.known[name].rev {
		return // not a host, or what this node wrote itself
	}
	if hs.isPending(name) {
		hs.log.Info("shared state: host changed here and on another node at once; the other change reached the cluster first and is kept", "host", name, "revision", e.Revision())
		hs.unqueue(name)
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(hs.known, name)
		if _, err := hs.db.Remove(name); err != nil {
			hs.log.Error("shared state: removing a host deleted in the cluster failed", "host", name, "err", err)
		}
		return
	}
	h, ok := hs.decode(e, name)
	if !ok {
		return
	}
	hs.known[name] = knownHost{h: h, rev: e.Revision()}
	if _, err := hs.db.Apply(h); err != nil {
		hs.log.Error("shared state: applying a host record of the cluster failed", "host", name, "err", err)
	}
}

func (hs *hostSync) push(ctx context.Context) error {
	hs.mu.Lock()
	names := make([]string, 0, len(hs.pending))
	for n := range hs.pending {
		names = append(names, n)
	}
	hs.mu.Unlock()
	var failed error
	for _, name := range names {
		if err := hs.pushOne(ctx, name); err != nil {
			failed = err
			if hs.writes.Fail() {
				hs.log.Warn("shared state: writing a host change to the cluster failed; trying again until it succeeds", "bucket", HostsBucket, "host", name, "err", err)
			}
		}
	}
	if failed == nil && len(names) > 0 {
		if n := hs.writes.Recover(); n > 0 {
			hs.log.Info("shared state: host changes are written to the cluster again", "bucket", HostsBucket, "failures", n)
		}
	}
	return failed
}

// pushOne writes host name's local record (or its deletion) to the
// bucket, based on the revision last seen.
func (hs *hostSync) pushOne(ctx context.Context, name string) error {
	// Unqueued first: a change made while this one is written queues it
	// again.
	hs.unqueue(name)
	k, inBucket := hs.known[name]
	inBucket = inBucket && !k.gone
	h, err := hs.db.Host(name)
	local := err == nil
	if err != nil && !errors.Is(err, hostdb.ErrNoHost) {
		hs.queue(name)
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, hs.o.OpTimeout)
	defer cancel()
	key := nameKey(hostPrefix, name)
	var rev uint64
	switch {
	case !local && !inBucket:
		return nil
	case !local:
		err = hs.bucket.Delete(ctx, key, jetstream.LastRevision(k.rev))
		if err == nil {
			hs.known[name] = knownHost{rev: k.rev, gone: true}
		}
	default:
		h = replicated(h)
		if inBucket && hostdb.Equal(h, k.h) {
			return nil
		}
		b, _ := json.Marshal(h) // a Host always marshals
		if inBucket {
			rev, err = hs.bucket.Update(ctx, key, b, k.rev)
		} else {
			// Create also succeeds over a delete marker.
			rev, err = hs.bucket.Create(ctx, key, b)
		}
		if err == nil {
			hs.known[name] = knownHost{h: h, rev: rev}
		}
	}
	switch {
	case err == nil:
		return nil
	case conflict(err):
		// The bucket moved on: its record wins; the watcher brings it.
		hs.log.Info("shared state: host changed on another node first; its change is kept and this one dropped", "host", name)
		return nil
	}
	hs.queue(name)
	return err
}
