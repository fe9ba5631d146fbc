package sharedstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TypesBucket holds the cluster's record-type registry.
const TypesBucket = "tracebridge_types"

// The keys of the types bucket: "name.<name in base64url>" holds a
// type's id and description (JSON), "id.<decimal id>" the name that
// holds the id. Both are only ever created (never changed), so an id,
// once given, names one type for the life of the bucket.
const (
	typeNamePrefix = "name."
	typeIDPrefix   = "id."
)

// TypeEntry is a record type the cluster knows.
type TypeEntry struct {
	ID uint32 `json:"id"`
	// Desc is what the node that first named the type said of it (its
	// IRL description, internal/irl.Describe, so that a node that never
	// saw the type can decode its records); opaque to the registry.
	Desc []byte `json:"desc,omitempty"`
}

// Types is the cluster's record-type registry: like Kieker's kieker.map,
// one id per record type name, but the same on every node, so records
// that cross the wire between nodes (the ingest stream) may name their
// type by id. Ids are given first come, first served through the
// bucket's create-only writes; a node asks for an id once per type and
// then reads its cache.
//
// Concurrency: a Types is safe for concurrent use. ID and Lookup of a
// known type take a read lock and do not allocate.
type Types struct {
	bucket jetstream.KeyValue
	o      Options

	mu     sync.RWMutex
	byName map[string]TypeEntry
	byID   map[uint32]string
	next   uint32 // the least id not known to be taken
	done   chan struct{}
}

// StartTypes binds the types bucket (replicas as o says), reads it and
// keeps the cache current until ctx ends.
func StartTypes(ctx context.Context, js jetstream.JetStream, o Options) (*Types, error) {
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 5 * time.Second
	}
	kv, err := bucket(ctx, js, TypesBucket, "tracebridge record types: name <-> id", o.Replicas)
	if err != nil {
		return nil, err
	}
	t := &Types{bucket: kv, o: o, byName: map[string]TypeEntry{}, byID: map[uint32]string{}, next: 1, done: make(chan struct{})}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("shared state: watching %s: %w", TypesBucket, err)
	}
	// The initial values, then the loop.
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	limit := time.NewTimer(o.StartTimeout)
	defer limit.Stop()
	for initial := true; initial; {
		select {
		case <-limit.C:
			w.Stop()
			return nil, fmt.Errorf("shared state: reading %s: no answer within %v", TypesBucket, o.StartTimeout)
		case <-ctx.Done():
			w.Stop()
			return nil, fmt.Errorf("shared state: reading %s: %w", TypesBucket, ctx.Err())
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, fmt.Errorf("shared state: reading %s: the watcher stopped", TypesBucket)
			case e == nil:
				initial = false
			default:
				t.take(e)
			}
		}
	}
	go func() {
		defer close(t.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					t.take(e)
				}
			}
		}
	}()
	return t, nil
}

// Done is closed once the cache is no longer kept current (ctx ended).
func (t *Types) Done() <-chan struct{} { return t.done }

// take puts a bucket entry into the cache.
func (t *Types) take(e jetstream.KeyValueEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if name, ok := keyName(typeNamePrefix, e.Key()); ok {
		var te TypeEntry
		if json.Unmarshal(e.Value(), &te) == nil && te.ID != 0 {
			t.put(name, te)
		}
		return
	}
	if rest, ok := strings.CutPrefix(e.Key(), typeIDPrefix); ok {
		if id, err := strconv.ParseUint(rest, 10, 32); err == nil && id >= uint64(t.next) {
			t.next = uint32(id) + 1 // taken, perhaps by a name not yet seen
		}
	}
}

// put caches name's entry (mu held).
func (t *Types) put(name string, te TypeEntry) {
	t.byName[name] = te
	t.byID[te.ID] = name
	if te.ID >= t.next {
		t.next = te.ID + 1
	}
}

// Lookup returns the name and entry of type id, if the cache knows it.
func (t *Types) Lookup(id uint32) (string, TypeEntry, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	name, ok := t.byID[id]
	return name, t.byName[name], ok
}

// Resolve returns the name and entry of type id, asking the bucket when
// the cache does not know it yet (a type another node just named).
func (t *Types) Resolve(ctx context.Context, id uint32) (string, TypeEntry, error) {
	if name, te, ok := t.Lookup(id); ok {
		return name, te, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.o.OpTimeout)
	defer cancel()
	e, err := t.bucket.Get(ctx, typeIDPrefix+strconv.FormatUint(uint64(id), 10))
	if err != nil {
		return "", TypeEntry{}, fmt.Errorf("record type %d: %w", id, err)
	}
	name := string(e.Value())
	ne, err := t.bucket.Get(ctx, nameKey(typeNamePrefix, name))
	if err != nil {
		return "", TypeEntry{}, fmt.Errorf("record type %d (%s): %w", id, name, err)
	}
	t.take(ne)
	var te TypeEntry
	if err := json.Unmarshal(ne.Value(), &te); err != nil || te.ID != id {
		// The id was taken by a node that lost the race for the name:
		// the name has another id, and this one names nothing.
		return "", TypeEntry{}, fmt.Errorf("record type %d: not in use (%s has id %d)", id, name, te.ID)
	}
	return name, te, nil
}

// ID returns type name's id, giving it one (with desc) when the cluster
// has none yet.
func (t *Types) ID(ctx context.Context, name string, desc []byte) (uint32, error) {
	t.mu.RLock()
	te, ok := t.byName[name]
	t.mu.RUnlock()
	if ok {
		return te.ID, nil
	}
	if name == "" {
		return 0, errors.New("record type without a name")
	}
	ctx, cancel := context.WithTimeout(ctx, t.o.OpTimeout)
	defer cancel()
	nkey := nameKey(typeNamePrefix, name)
	for {
		// Named meanwhile (by another node)?
		if e, err := t.bucket.Get(ctx, nkey); err == nil {
			t.take(e)
			t.mu.RLock()
			te, ok := t.byName[name]
			t.mu.RUnlock()
			if ok {
				return te.ID, nil
			}
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, fmt.Errorf("record type %s: %w", name, err)
		}
		// Take the least free id, then the name.
		t.mu.RLock()
		id := t.next
		t.mu.RUnlock()
		if _, err := t.bucket.Create(ctx, typeIDPrefix+strconv.FormatUint(uint64(id), 10), []byte(name)); err != nil {
			if !conflict(err) {
				return 0, fmt.Errorf("record type %s: %w", name, err)
			}
			t.mu.Lock()
			if t.next <= id {
				t.next = id + 1
			}
			t.mu.Unlock()
			continue // another node took that id: the next one
		}
		te := TypeEntry{ID: id, Desc: desc}
		b, _ := json.Marshal(te)
		if _, err := t.bucket.Create(ctx, nkey, b); err != nil {
			if !conflict(err) {
				return 0, fmt.Errorf("record type %s: %w", name, err)
			}
			continue // another node named it first: its id wins (ours stays unused)
		}
		t.mu.Lock()
		t.put(name, te)
		t.mu.Unlock()
		return id, nil
	}
}
