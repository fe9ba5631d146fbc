package sharedstate

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/clusterstatus"
	"github.com/tracebridge/tracebridge/internal/control"
	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// The buckets.
const (
	HostsBucket   = "tracebridge_hosts"
	ControlBucket = "tracebridge_control"
)

// Options say what to replicate and how.
type Options struct {
	// Node is this node's name (in logs, and the value of the control
	// bucket's "seeded" key).
	Node   string
	Logger *slog.Logger
	// Hosts is the node's host table (nil: not replicated).
	Hosts *hostdb.DB
	// Control is the node's controller (nil: not replicated).
	Control *control.Controller
	// Replicas of each bucket (default 3; 1 on a single server).
	Replicas int
	// RetryInterval: how long after a failed write the change is tried
	// again (default 1 s).
	RetryInterval time.Duration
	// OpTimeout bounds each bucket operation (default 5 s).
	OpTimeout time.Duration
	// StartTimeout bounds Start: binding the buckets and reading them
	// (default 30 s).
	StartTimeout time.Duration
}

// Sync is the running replication of a node's shared state.
type Sync struct {
	wg    sync.WaitGroup
	done  chan struct{}
	loops []*watchLoop
}

// Degraded says, one line per bucket, what keeps the node's shared state
// from being the cluster's: local changes that cannot be written, or a
// bucket it cannot watch (none when all is well). The cluster's status
// adds it to its own.
func (s *Sync) Degraded() []string {
	var out []string
	for _, wl := range s.loops {
		if p := wl.problem.Load(); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// Done is closed once every goroutine of the Sync has ended (after the
// context given to Start).
func (s *Sync) Done() <-chan struct{} { return s.done }

// Start binds the buckets, brings the local host table and control
// settings to the cluster's state (see the package comment) and keeps
// them in sync until ctx ends. It returns once the local copies agree
// with the buckets (or with an error, having started nothing).
func Start(ctx context.Context, js jetstream.JetStream, o Options) (*Sync, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = time.Second
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 5 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	sctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	o.Logger = o.Logger.With("node", o.Node)
	var loops []loop
	if o.Hosts != nil {
		kv, err := bucket(sctx, js, HostsBucket, "tracebridge host table (internal/hostdb records)", o.Replicas)
		if err != nil {
			return nil, err
		}
		loops = append(loops, newHostSync(o, kv))
	}
	if o.Control != nil {
		kv, err := bucket(sctx, js, ControlBucket, "tracebridge control settings (internal/control)", o.Replicas)
		if err != nil {
			return nil, err
		}
		loops = append(loops, newControlSync(o, kv))
	}
	s := &Sync{done: make(chan struct{})}
	var started []*watchLoop
	for _, l := range loops {
		wl := &watchLoop{loop: l, o: o}
		if err := wl.start(ctx, sctx); err != nil {
			for _, w := range started {
				w.stop()
			}
			return nil, err
		}
		started = append(started, wl)
	}
	s.loops = started
	for _, wl := range started {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			wl.run(ctx)
		}()
	}
	go func() {
		s.wg.Wait()
		close(s.done)
	}()
	return s, nil
}

// bucket binds (creating it when needed) a key-value bucket.
func bucket(ctx context.Context, js jetstream.JetStream, name, desc string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, Description: desc, History: 1, Replicas: replicas, Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		// Made by another node with another configuration: use it.
		kv, err = js.KeyValue(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("shared state: bucket %s: %w", name, err)
	}
	return kv, nil
}

// loop is what one bucket's replication does on its goroutine.
type loop interface {
	kv() jetstream.KeyValue
	name() string
	// initial takes the bucket's values at start (deletes included)
	// and brings the local copy to them.
	initial(ctx context.Context, entries []jetstream.KeyValueEntry)
	// remote applies an entry another node (or this one) wrote.
	remote(ctx context.Context, e jetstream.KeyValueEntry)
	// push writes the local changes queued; an error: some failed (the
	// last error), try again later.
	push(ctx context.Context) error
	// wake is signalled when local changes are queued.
	wake() <-chan struct{}
}

// watchLoop runs a loop: its watcher, the pushes and their retries.
type watchLoop struct {
	loop loop
	o    Options
	w    jetstream.KeyWatcher
	// problem is what is wrong now (nil: nothing), for Degraded.
	problem atomic.Pointer[string]
	since   time.Time // when the problem began
}

// trouble notes what is wrong now (err nil: nothing).
func (wl *watchLoop) trouble(what string, err error) {
	if err == nil {
		wl.problem.Store(nil)
		wl.since = time.Time{}
		return
	}
	if wl.since.IsZero() {
		wl.since = time.Now()
	}
	msg := fmt.Sprintf("shared state: %s %s fails since %s: %v", what, wl.loop.name(), wl.since.UTC().Format(time.TimeOnly), err)
	wl.problem.Store(&msg)
}

// start watches the bucket (for as long as ctx lasts) and takes its
// initial values (within sctx).
func (wl *watchLoop) start(ctx, sctx context.Context) error {
	w, err := wl.loop.kv().WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("shared state: watching %s: %w", wl.loop.name(), err)
	}
	var initial []jetstream.KeyValueEntry
	for {
		select {
		case <-sctx.Done():
			w.Stop()
			return fmt.Errorf("shared state: reading %s: %w", wl.loop.name(), sctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("shared state: reading %s: the watcher stopped", wl.loop.name())
			}
			if e != nil {
				initial = append(initial, e)
				continue
			}
		}
		break
	}
	wl.w = w
	wl.loop.initial(sctx, initial)
	return nil
}

func (wl *watchLoop) stop() {
	if wl.w != nil {
		wl.w.Stop()
	}
}

// run applies what the bucket brings and pushes local changes until ctx
// ends; a watcher that stops is made again (its initial values applied
// as remote ones).
func (wl *watchLoop) run(ctx context.Context) {
	defer wl.stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	// Making the watcher again fails on every try while the node is cut
	// off: logged once when it starts and once when it ends.
	var watching lograte.Outage
	pushNow := func() {
		err := wl.loop.push(ctx)
		if ctx.Err() != nil {
			return
		}
		if wl.w != nil {
			wl.trouble("writing local changes to", err)
		}
		if err != nil {
			retry.Reset(wl.o.RetryInterval)
		}
	}
	pushNow()
	for {
		var updates <-chan jetstream.KeyValueEntry
		if wl.w != nil {
			updates = wl.w.Updates()
		}
		select {
		case <-ctx.Done():
			return
		case e, ok := <-updates:
			if !ok {
				wl.w = nil
				wl.trouble("watching", errors.New("the watcher stopped"))
				retry.Reset(wl.o.RetryInterval)
				continue
			}
			if e != nil {
				wl.loop.remote(ctx, e)
			}
		case <-wl.loop.wake():
			pushNow()
		case <-retry.C:
			if wl.w == nil {
				w, err := wl.loop.kv().WatchAll(ctx)
				if err != nil {
					if watching.Fail() {
						wl.o.Logger.Warn("shared state: watching the bucket again failed; trying again until it succeeds", "bucket", wl.loop.name(), "err", err)
					}
					wl.trouble("watching", err)
					retry.Reset(wl.o.RetryInterval)
					continue
				}
				if n := watching.Recover(); n > 0 {
					wl.o.Logger.Info("shared state: the bucket is watched again", "bucket", wl.loop.name(), "failures", n)
				}
				wl.w = w
			}
			pushNow()
		}
	}
}

// Keys: a name becomes a key as base64url (bucket keys allow letters,
// digits, - _ / = and inner dots only).
func nameKey(prefix, name string) string {
	return prefix + base64.RawURLEncoding.EncodeToString([]byte(name))
}

func keyName(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) == 0 {
		return "", false
	}
	return string(b), true
}

// conflict reports whether a write failed because the key's revision
// moved on (compare and swap lost).
func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// StartShared starts the replication of what a bridge shares in sh: its
// host table (sh.HostDB()) and its controller (control.Lookup(sh)), with
// replicas per bucket. Call it once the bridge's components are built
// (the controller exists once a control stage or a stream sink made it);
// what the bridge lacks is not replicated. It returns nil and no error
// when there is nothing to replicate.
func StartShared(ctx context.Context, js jetstream.JetStream, node string, sh *pipeline.Shared, logger *slog.Logger, replicas int) (*Sync, error) {
	o := Options{Node: node, Logger: logger, Hosts: sh.HostDB(), Control: control.Lookup(sh), Replicas: replicas}
	if o.Hosts == nil && o.Control == nil {
		return nil, nil
	}
	return Start(ctx, js, o)
}

// Status wraps the cluster's status so that what keeps this node's shared
// state from being the cluster's (Degraded) is listed with what the
// cluster finds degraded. Publish the result (clusterstatus.Publish).
func (s *Sync) Status(src clusterstatus.Source) clusterstatus.Source {
	return clusterstatus.SourceFunc(func(ctx context.Context) (clusterstatus.Status, error) {
		st, err := src.ClusterStatus(ctx)
		if err != nil {
			return st, err
		}
		if d := s.Degraded(); len(d) > 0 {
			st.Degraded = append(slices.Clip(st.Degraded), d...)
		}
		return st, nil
	})
}
