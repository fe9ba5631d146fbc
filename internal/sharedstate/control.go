package sharedstate

import (
	"context"
	"log/slog"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/control"
	"github.com/tracebridge/tracebridge/internal/lograte"
)

// The keys of the control bucket: one per setting in force, the name in
// base64url; the value is "off" for a type or host switched off, the
// sampling rate for a sampled type. Enabling deletes the key.
const (
	typePrefix   = "type."
	hostOffKey   = "host."
	samplePrefix = "sample."
	seededKey    = "seeded"
	off          = "off"
)

// settings turns control settings into the bucket's keys and values.
func settings(st streammsg.ControlState) map[string]string {
	m := make(map[string]string, len(st.DisabledTypes)+len(st.DisabledHosts)+len(st.Samples))
	for _, t := range st.DisabledTypes {
		m[nameKey(typePrefix, t)] = off
	}
	for _, h := range st.DisabledHosts {
		m[nameKey(hostOffKey, h)] = off
	}
	for _, s := range st.Samples {
		m[nameKey(samplePrefix, s.Type)] = strconv.FormatFloat(s.Rate, 'g', -1, 64)
	}
	return m
}

// request is the command that makes a key's value ("" when absent) the
// local setting; false for a key that is no setting.
func request(key, val string) (streammsg.ControlRequest, bool) {
	if name, ok := keyName(typePrefix, key); ok {
		if val == off {
			return streammsg.ControlRequest{Op: streammsg.OpDisable, Type: name}, true
		}
		return streammsg.ControlRequest{Op: streammsg.OpEnable, Type: name}, true
	}
	if name, ok := keyName(hostOffKey, key); ok {
		if val == off {
			return streammsg.ControlRequest{Op: streammsg.OpDisable, Host: name}, true
		}
		return streammsg.ControlRequest{Op: streammsg.OpEnable, Host: name}, true
	}
	if name, ok := keyName(samplePrefix, key); ok {
		rate := 1.0
		if val != "" {
			r, err := strconv.ParseFloat(val, 64)
			if err != nil || !(r > 0 && r <= 1) {
				return streammsg.ControlRequest{}, false
			}
			rate = r
		}
		return streammsg.ControlRequest{Op: streammsg.OpSample, Type: name, Rate: rate}, true
	}
	return streammsg.ControlRequest{}, false
}

// controlSync replicates the control settings (see the package comment).
type controlSync struct {
	o      Options
	c      *control.Controller
	bucket jetstream.KeyValue
	log    *slog.Logger
	// writes: writing settings to the bucket fails on every try while
	// the node is cut off from the cluster; logged once when it starts
	// and once when it ends.
	writes lograte.Outage

	// known: the bucket's value and revision of each key (the loop's
	// goroutine only).
	known map[string]knownValue

	mu      sync.Mutex // guards pending (the controller's hook adds to it)
	pending map[string]bool
	signal  chan struct{}
}

type knownValue struct {
	val string
	rev uint64
	// gone: this node deleted the key at a revision after rev.
	gone bool
}

func newControlSync(o Options, kv jetstream.KeyValue) *controlSync {
	cs := &controlSync{o: o, c: o.Control, bucket: kv, log: o.Logger,
		known: map[string]knownValue{}, pending: map[string]bool{}, signal: make(chan struct{}, 1)}
	cs.c.OnChange(cs.changed)
	return cs
}

func (cs *controlSync) kv() jetstream.KeyValue { return cs.bucket }
func (cs *controlSync) name() string           { return ControlBucket }
func (cs *controlSync) wake() <-chan struct{}  { return cs.signal }

// changed queues the settings a change made (the controller calls it
// after every change, on the goroutine that made it).
func (cs *controlSync) changed(old, now streammsg.ControlState) {
	a, b := settings(old), settings(now)
	cs.mu.Lock()
	n := 0
	for k, v := range a {
		if b[k] != v {
			cs.pending[k] = true
			n++
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			cs.pending[k] = true
			n++
		}
	}
	cs.mu.Unlock()
	if n > 0 {
		select {
		case cs.signal <- struct{}{}:
		default:
		}
	}
}

func (cs *controlSync) initial(ctx context.Context, entries []jetstream.KeyValueEntry) {
	seeded := false
	for _, e := range entries {
		if e.Operation() != jetstream.KeyValuePut {
			continue
		}
		if e.Key() == seededKey {
			seeded = true
		}
		cs.known[e.Key()] = knownValue{val: string(e.Value()), rev: e.Revision()}
	}
	local := settings(cs.c.State())
	if !seeded {
		octx, cancel := context.WithTimeout(ctx, cs.o.OpTimeout)
		rev, err := cs.bucket.Create(octx, seededKey, []byte(cs.o.Node))
		cancel()
		if err == nil {
			// This node seeds the cluster's settings with its own.
			cs.known[seededKey] = knownValue{val: cs.o.Node, rev: rev}
			cs.mu.Lock()
			for k := range local {
				cs.pending[k] = true
			}
			cs.mu.Unlock()
			cs.log.Info("shared state: control settings seeded from this node", "bucket", ControlBucket, "settings", len(local))
			return
		}
		// Another node seeds them (or the bucket is unreachable: the
		// watcher brings what it has once it can).
	}
	n := 0
	for k := range local {
		if _, ok := cs.known[k]; !ok {
			n += cs.apply(k, "")
		}
	}
	for k, v := range cs.known {
		if local[k] != v.val {
			n += cs.apply(k, v.val)
		}
	}
	cs.log.Info("shared state: control settings in sync with the cluster", "bucket", ControlBucket, "settings", len(cs.known), "changed", n)
}

// apply makes the local setting of key val (the bucket's); it returns 1
// when it applied a setting. The controller tells changed of it, which
// queues the key, and push finds the bucket has it already.
func (cs *controlSync) apply(key, val string) int {
	req, ok := request(key, val)
	if !ok {
		return 0
	}
	cs.mu.Lock()
	if cs.pending[key] {
		// A change of this node not yet written (or the echo of the
		// last applied): the bucket's value wins.
		cs.log.Debug("shared state: control setting changed here and in the cluster; the cluster's value is kept", "key", key)
		delete(cs.pending, key)
	}
	cs.mu.Unlock()
	_, err := cs.c.ApplyExact(req)
	if err != nil {
		cs.log.Error("shared state: applying a control setting of the cluster failed", "op", req.Op, "type", req.Type, "host", req.Host, "err", err)
		return 0
	}
	return 1
}

func (cs *controlSync) remote(_ context.Context, e jetstream.KeyValueEntry) {
	key := e.Key()
	if e.Revision() <= cs.known[key].rev {
		return // what this node wrote itself
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(cs.known, key)
		cs.apply(key, "")
		return
	}
	cs.known[key] = knownValue{val: string(e.Value()), rev: e.Revision()}
	cs.apply(key, string(e.Value()))
}

func (cs *controlSync) push(ctx context.Context) error {
	cs.mu.Lock()
	keys := make([]string, 0, len(cs.pending))
	for k := range cs.pending {
		keys = append(keys, k)
	}
	clear(cs.pending)
	cs.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	local := settings(cs.c.State())
	var failed error
	for _, key := range keys {
		want, set := local[key]
		k, inBucket := cs.known[key]
		inBucket = inBucket && !k.gone
		if set == inBucket && want == k.val {
			continue
		}
		octx, cancel := context.WithTimeout(ctx, cs.o.OpTimeout)
		var err error
		if set {
			var rev uint64
			if rev, err = cs.bucket.Put(octx, key, []byte(want)); err == nil {
				cs.known[key] = knownValue{val: want, rev: rev}
			}
		} else if err = cs.bucket.Delete(octx, key); err == nil {
			cs.known[key] = knownValue{rev: k.rev, gone: true}
		}
		cancel()
		if err != nil {
			failed = err
			cs.mu.Lock()
			cs.pending[key] = true
			cs.mu.Unlock()
			if cs.writes.Fail() {
				cs.log.Warn("shared state: writing a control setting to the cluster failed; trying again until it succeeds", "bucket", ControlBucket, "key", key, "err", err)
			}
		}
	}
	if failed == nil {
		if n := cs.writes.Recover(); n > 0 {
			cs.log.Info("shared state: control settings are written to the cluster again", "bucket", ControlBucket, "failures", n)
		}
	}
	return failed
}
