package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/natslogin"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Buckets of the cluster's replicated state (JetStream key-value).
const (
	LeaseBucket = "tb_leases"
	NodeBucket  = "tb_nodes"
)

// Defaults of Options' intervals.
const (
	// DefaultLeaseTTL: a partition whose owner stopped renewing is free
	// this long after its last renewal; the takers try it within
	// takeEvery of its expiry, so another node owns it within about
	// LeaseTTL + 0.5 s, or a bucket's leader election when that is
	// longer (the takeover bound, docs/CLUSTER.md).
	DefaultLeaseTTL = 8 * time.Second
	// DefaultCheckpointInterval: how often an owner makes its blocks
	// durable and removes what they hold from the stream.
	DefaultCheckpointInterval = 5 * time.Second
)

// TraceSink takes the traces an owner assembles (the store sink). One
// that has PackedTraces() true (pipeline.PackedTraceConsumer) gets the
// traces of span records packed (trace.Options.Packed).
type TraceSink interface {
	ConsumeTraces(ctx context.Context, ts []*trace.Trace) error
}

// Options configure a Node.
type Options struct {
	// Node is this node's name; Partitions and Replicas the cluster's.
	Node                 string
	Partitions, Replicas int
	// URL is the NATS server to connect to (this node's embedded
	// server, or an existing cluster's URLs, comma-separated), with
	// Login: user and password, a token or a NATS .creds file when it
	// needs them, and TLS (a CA to trust, a client certificate) when it
	// speaks TLS. Every connection of the node is this one (publisher,
	// owners, buckets, status).
	URL   string
	Login natslogin.Login
	// StreamMaxBytes bounds the stream (0: half of StorageMax, the
	// JetStream storage of this node's embedded server, or of the
	// account's limit; none when neither is known); StreamMaxAge drops
	// messages older than it, stored or not (0: never). A full stream
	// refuses new messages (ErrStreamFull).
	StreamMaxBytes, StorageMax int64
	StreamMaxAge               time.Duration
	// NATSAddr and HTTPAddr are what the heartbeat tells others.
	NATSAddr, HTTPAddr string
	// Catalog resolves record types of messages (nil: trace.Types()).
	Catalog *record.Catalog
	// Traces configures each owned partition's assembly (its Emit and
	// Clock are the node's); MaxOpenTraces is divided among the
	// partitions this node may own.
	Traces trace.Options
	// Sink takes the assembled traces; Persist makes what Sink took
	// durable in the shared store (store.Persist). Without them the node
	// only publishes (and owns nothing).
	Sink    TraceSink
	Persist func(context.Context) error
	// Expected is how many nodes the cluster has when all run (the
	// embedded servers' routes + 1; 0: unknown): a node starting first
	// takes no more than its share of them, not every partition.
	Expected int
	// LeaseTTL and CheckpointInterval (0: the defaults).
	LeaseTTL, CheckpointInterval time.Duration
	Logger                       *slog.Logger
	Metrics                      *metrics.Registry
}

// Node is one node of a cluster: its connection to JetStream, the
// publisher its engine delivers to, and the owners of the partitions it
// holds. Status describes it.
type Node struct {
	opt Options
	log *slog.Logger
	nc  *nats.Conn
	js  jetstream.JetStream
	pub *Publisher
	met *nodeMetrics

	started time.Time

	mu      sync.Mutex
	stream  jetstream.Stream
	leases  jetstream.KeyValue
	nodes   jetstream.KeyValue
	owners  map[int]*owner
	ready   bool
	lastCk  time.Time
	ckErr   error
	lag     map[int]uint64
	lagAt   time.Time // when lag was read
	seen    []NodeStatus
	gone    map[string]NodeStatus // nodes whose heartbeat expired: killed or cut off
	leaseOf map[int]leaseValue
	sinfo   *jetstream.StreamInfo
	sErr    error
	// beatErr is why this node's heartbeat fails (nil: it does), since
	// beatFailing: cut off from the cluster's quorum.
	beatErr     error
	beatFailing time.Time
	// fenced are the leases this node's owners stopped holding because
	// a renewal did not succeed in time: renewed again (revision-checked,
	// before they expire) they are owned again without a takeover.
	fenced  map[int]fencedLease
	ckBegan time.Time // when the checkpoint running began (zero: none runs)

	warnedLimit bool // the setup goroutine's

	// leaseExp and nodeExp follow the leases and the heartbeats (hints
	// for the takers: which leases are free, how many nodes are alive).
	leaseExp, nodeExp *expiries

	// ownCtx is the owners' context (Run's, not cancelled with it:
	// releaseAll stops the owners).
	ownCtx context.Context

	// readSettle is the owners' (0: readSettle; tests shorten it).
	readSettle time.Duration
	// lose, set by tests, makes an owner's reader pass over the
	// messages it reports (as a JetStream consumer that skipped them).
	lose func(p int, seq uint64) bool

	runDone chan struct{}
}

// leaseValue is what a lease holds.
type leaseValue struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
	// Checkpoint is the stream sequence up to which the owner purged
	// the partition (its records are in blocks), as of the last renewal.
	Checkpoint uint64 `json:"checkpoint,omitempty"`
	// Renewed is when the owner sent the renewal (or the take) that
	// stored this value, by its clock: a taker takes the lease over
	// once this and the bucket's timestamp of the value are both more
	// than LeaseTTL + maxSkew old by its own clock (takeStale), without
	// waiting for the bucket to remove it. Zero in leases of nodes of
	// earlier versions: those only expire.
	Renewed time.Time `json:"renewed,omitzero"`
}

// New connects to NATS; Run sets up the stream and the buckets and runs
// the node.
func New(opt Options) (*Node, error) {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.LeaseTTL <= 0 {
		opt.LeaseTTL = DefaultLeaseTTL
	}
	if opt.CheckpointInterval <= 0 {
		opt.CheckpointInterval = DefaultCheckpointInterval
	}
	if opt.Partitions <= 0 || opt.Replicas <= 0 || opt.Node == "" {
		return nil, errors.New("cluster: node name, partitions and replicas are required")
	}
	n := &Node{opt: opt, log: opt.Logger, started: time.Now(), owners: map[int]*owner{}, fenced: map[int]fencedLease{},
		leaseExp: newExpiries(opt.LeaseTTL), nodeExp: newExpiries(opt.LeaseTTL), runDone: make(chan struct{})}
	n.met = newNodeMetrics(n)
	if err := opt.Metrics.Register(n.met.collectors()...); err != nil {
		return nil, fmt.Errorf("cluster: metrics: %w", err)
	}
	copts := []nats.Option{nats.Name("tracebridge cluster node " + opt.Node), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		// Keep trying after the servers refused the credentials twice
		// (nats.go gives up then): a node waits for its NATS as it waits
		// for a quorum, and says why (notConnected).
		nats.RetryOnFailedConnect(true), nats.IgnoreAuthErrorAbort(),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				n.log.Warn("cluster: disconnected from NATS", "node", opt.Node, "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			n.log.Info("cluster: reconnected to NATS", "node", opt.Node, "server", c.ConnectedUrlRedacted())
		}),
		// (Without it nats.go writes these to stderr.) The buckets'
		// watchers' consumers vanish while the client is cut off and are
		// made again (expiries.follow): not worth a warning.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			level := slog.LevelWarn
			if errors.Is(err, nats.ErrConsumerNotActive) {
				level = slog.LevelDebug
			}
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			n.log.Log(context.Background(), level, "cluster: NATS connection error", "node", opt.Node, "subject", subject, "err", err)
		}),
	}
	copts = append(copts, opt.Login.Options()...)
	nc, err := nats.Connect(opt.URL, copts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: connecting to %s: %w", opt.URL, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending), jetstream.WithPublishAsyncTimeout(PublishTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.nc, n.js = nc, js
	n.pub = newPublisher(n)
	return n, nil
}

// Compactor says whether this node holds partition 0's lease, before its
// owner's renewal deadline: the one node of the cluster that applies
// retention and compacts the shared store's blocks (a lease, so there is
// at most one, and a new one within a takeover when it dies).
func (n *Node) Compactor() bool {
	n.mu.Lock()
	o := n.owners[0]
	n.mu.Unlock()
	// Past its deadline the owner may have another node as successor,
	// even while its renewal has not told it yet (one that hangs, or a
	// lease goroutine busy handing a partition over).
	return o != nil && !o.lapsed()
}

// Name is the node's name.
func (n *Node) Name() string { return n.opt.Node }

// JetStream is the node's JetStream handle (the shared state's buckets
// live there too).
func (n *Node) JetStream() jetstream.JetStream { return n.js }

// Conn is the node's NATS connection.
func (n *Node) Conn() *nats.Conn { return n.nc }

// Publisher is the sink the node's engine delivers to.
func (n *Node) Publisher() *Publisher { return n.pub }

// owns says whether the node takes partitions.
func (n *Node) owns() bool { return n.opt.Sink != nil && n.opt.Persist != nil }

// Run sets up the stream and the buckets (waiting for JetStream, which
// needs a quorum of the cluster's servers), then keeps the heartbeat,
// takes, renews and releases leases, runs the owners and checkpoints,
// until ctx ends. Then it checkpoints a last time, releases its leases
// (so that others take over at once) and returns.
func (n *Node) Run(ctx context.Context) error {
	defer close(n.runDone)
	if err := n.setup(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		// Stopped before JetStream was ready: no stream, no buckets,
		// nothing owned.
		return nil
	}
	n.log.Info("cluster: node ready", "node", n.opt.Node, "partitions", n.opt.Partitions, "replicas", n.opt.Replicas)
	// The owners outlive ctx: releaseAll stops them, handing their open
	// traces to the next owners when other nodes are alive.
	octx, ostop := context.WithCancel(context.WithoutCancel(ctx))
	defer ostop()
	n.ownCtx = octx
	var wg sync.WaitGroup
	wg.Go(func() { n.checkpoints(ctx) })
	wg.Go(func() { n.refreshes(ctx) })
	wg.Go(func() { n.nodeExp.follow(ctx, n.nodes) })
	if n.owns() {
		wg.Go(func() { n.leaseExp.follow(ctx, n.leases) })
		wg.Go(func() { n.takers(ctx) })
	}
	n.leaseLoop(ctx)
	wg.Wait()
	n.releaseAll()
	return nil
}

// setup creates (or finds) the stream and the buckets, retrying until
// JetStream answers.
func (n *Node) setup(ctx context.Context) error {
	warned := false
	for {
		err := n.trySetup(ctx)
		if err == nil {
			n.mu.Lock()
			n.ready = true
			n.mu.Unlock()
			return nil
		}
		if !warned {
			if why := n.notConnected(); why != "" {
				n.log.Warn("cluster: "+why+"; retrying", "node", n.opt.Node, "err", err)
			} else {
				n.log.Warn("cluster: JetStream not ready yet (the cluster needs a quorum of its servers); retrying", "node", n.opt.Node, "err", err)
			}
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// notConnected says why the node has no NATS connection ("" when it
// has one): the servers' last error, such as "nats: authorization
// violation" for a wrong nats_user, nats_password, nats_token or
// nats_creds.
func (n *Node) notConnected() string {
	if n.nc.IsConnected() {
		return ""
	}
	if err := n.nc.LastError(); err != nil {
		// A refusal reaches nats.go two ways: during the handshake as
		// ErrAuthorization, afterwards as the server's own "-ERR
		// 'Authorization Violation'"; both say the same.
		if strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			err = nats.ErrAuthorization
		}
		return fmt.Sprintf("not connected to NATS: %v", err)
	}
	return "not connected to NATS"
}

func (n *Node) trySetup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := n.ensureStream(ctx)
	if err != nil {
		return err
	}
	leases, err := n.bucket(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, Description: "tracebridge cluster: partition leases",
		TTL: n.opt.LeaseTTL, History: 1, Replicas: n.opt.Replicas, Storage: jetstream.FileStorage})
	if err != nil {
		return err
	}
	nodes, err := n.bucket(ctx, jetstream.KeyValueConfig{Bucket: NodeBucket, Description: "tracebridge cluster: node heartbeats",
		TTL: n.opt.LeaseTTL, History: 1, Replicas: n.opt.Replicas, Storage: jetstream.FileStorage})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.stream, n.leases, n.nodes = st, leases, nodes
	n.mu.Unlock()
	return nil
}

// bucket creates a bucket or, when another node made it, opens it.
func (n *Node) bucket(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := n.js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		kv, err = n.js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// heartbeat is what a node puts into the nodes bucket.
type heartbeat struct {
	HTTP    string    `json:"http,omitempty"`
	NATS    string    `json:"nats,omitempty"`
	Owned   int       `json:"owned"` // leases held, fenced ones included
	Started time.Time `json:"started"`
	Seen    time.Time `json:"seen"`
}

// leaseLoop runs every second: heartbeat, renewals, releases beyond
// this node's share (the takers take, in a goroutine of their own).
func (n *Node) leaseLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastBeat time.Time
	for {
		now := time.Now()
		if now.Sub(lastBeat) >= n.opt.LeaseTTL/4 {
			n.beat(ctx)
			lastBeat = now
		}
		n.renew(ctx)
		if n.owns() {
			n.rebalance(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// beat puts the heartbeat and reads the others'.
func (n *Node) beat(ctx context.Context) {
	n.mu.Lock()
	// A lease held fenced is still this node's (take counts it as
	// held): left out, the others would see this node below its share
	// during a fence and give it partitions for nothing.
	owned := len(n.owners) + len(n.fenced)
	n.mu.Unlock()
	hb := heartbeat{HTTP: n.opt.HTTPAddr, NATS: n.opt.NATSAddr, Owned: owned, Started: n.started, Seen: time.Now()}
	b, _ := json.Marshal(hb)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := n.nodes.Put(cctx, n.opt.Node, b); err != nil {
		n.log.Debug("cluster: heartbeat failed", "node", n.opt.Node, "err", err)
		n.mu.Lock()
		if n.beatErr == nil {
			n.beatFailing = time.Now()
		}
		n.beatErr = err
		n.mu.Unlock()
		return
	}
	n.mu.Lock()
	n.beatErr = nil
	n.mu.Unlock()
	var seen []NodeStatus
	lister, err := n.nodes.ListKeys(cctx)
	if err != nil {
		return
	}
	for k := range lister.Keys() {
		e, err := n.nodes.Get(cctx, k)
		if err != nil {
			continue
		}
		var h heartbeat
		if json.Unmarshal(e.Value(), &h) != nil {
			continue
		}
		seen = append(seen, NodeStatus{Name: k, HTTP: h.HTTP, NATS: h.NATS, Owned: h.Owned, Started: h.Started, Seen: e.Created()})
	}
	slices.SortFunc(seen, func(a, b NodeStatus) int { return cmpString(a.Name, b.Name) })
	n.mu.Lock()
	prev := n.seen
	n.mu.Unlock()
	// A node that was alive and whose heartbeat is no longer listed either
	// left (it deleted its heartbeat: a delete marker) or died (the
	// heartbeat expired: nothing left under its key); the dead stay in the
	// status as gone until they come back. A heartbeat still there was
	// missed by the listing (cut short by the timeout): still alive.
	// A listing without this node's own heartbeat, just put, is stale or
	// cut short (a replica still catching up after a partition healed
	// answered it): it tells no deaths.
	self := slices.ContainsFunc(seen, func(s NodeStatus) bool { return s.Name == n.opt.Node })
	var died []NodeStatus
	for _, p := range prev {
		if slices.ContainsFunc(seen, func(s NodeStatus) bool { return s.Name == p.Name }) {
			continue
		}
		if !self {
			seen = append(seen, p)
			continue
		}
		h, err := n.nodes.History(cctx, p.Name)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			died = append(died, p)
		case err == nil && len(h) > 0 && h[len(h)-1].Operation() != jetstream.KeyValuePut:
			// it left
		default: // still there, or no answer now: as it was
			seen = append(seen, p)
		}
	}
	slices.SortFunc(seen, func(a, b NodeStatus) int { return cmpString(a.Name, b.Name) })
	n.mu.Lock()
	n.seen = seen
	for _, d := range died {
		if n.gone == nil {
			n.gone = map[string]NodeStatus{}
		}
		n.gone[d.Name] = d
	}
	for _, s := range seen {
		delete(n.gone, s.Name)
	}
	n.mu.Unlock()
	for _, d := range died {
		n.log.Warn("cluster: a node's heartbeat expired: it is gone (killed or cut off)", "node", n.opt.Node, "gone", d.Name, "last_seen", d.Seen)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// leaseKey is partition p's key in the leases bucket.
func leaseKey(p int) string { return "p" + strconv.Itoa(p) }

// renew renews every lease held, each in a goroutine of its own (a
// renewal that waits for an unreachable quorum must not hold up the
// others' deadlines); an owner whose lease another took, or that could
// not renew before its fence deadline, is fenced: it stops and drops what
// it assembled.
func (n *Node) renew(ctx context.Context) {
	now := time.Now()
	n.mu.Lock()
	owners := make([]*owner, 0, len(n.owners))
	for _, o := range n.owners {
		if now.Sub(o.renewed) >= n.opt.LeaseTTL/4 {
			owners = append(owners, o)
		}
	}
	fenced := make([]fencedLease, 0, len(n.fenced))
	for _, f := range n.fenced {
		fenced = append(fenced, f)
	}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, o := range owners {
		wg.Go(func() { n.renewOne(ctx, o) })
	}
	for _, f := range fenced {
		wg.Go(func() { n.reclaim(ctx, f) })
	}
	wg.Wait()
}

// fencedLease is a lease whose owner was fenced because it could not be
// renewed in time: still this node's in the bucket until it expires or
// another node takes it.
type fencedLease struct {
	p       int
	value   []byte // the take's value (node, since) with its last checkpoint
	rev     uint64
	renewed time.Time // the last renewal stored
	fenced  time.Time
}

// reclaim renews a fenced lease, revision-checked: the update succeeds
// only while the lease is still this node's and unchanged (so no other
// node can have taken it, and its old owner has stopped), and then the
// partition is owned again at once, read from its first message in the
// stream. This is what keeps a quorum that answered late (a bucket's
// leader election after a node's death or a network partition's heal)
// from handing partitions over. The bucket decides, not this node's
// clock: the lease is forgotten when the bucket no longer has it, or has
// another's (a taker's create after it expired, or its revision-checked
// update once the renewal recorded in it was old: take).
func (n *Node) reclaim(ctx context.Context, f fencedLease) {
	cctx, cancel := context.WithTimeout(ctx, n.opt.LeaseTTL/4)
	defer cancel()
	t0 := time.Now()
	// Stamped with this attempt's time: a taker counts the lease's age
	// from it (takeStale), and the owner's deadline from t0.
	val := stamp(f.value, 0, t0)
	rev, err := n.leases.Update(cctx, leaseKey(f.p), val, f.rev)
	if err != nil {
		// A renewal sent before the fence may have been stored after it
		// (sent again on reconnection, or its answer lost): the lease
		// is then still this take's at a later revision.
		e, gerr := n.leases.Get(cctx, leaseKey(f.p))
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			n.dropFenced(f) // expired or deleted: the takers create it
			return
		case gerr != nil:
			return // no answer: again next round
		case !(&owner{value: f.value}).holds(e.Value()):
			n.dropFenced(f) // another node's now
			return
		}
		t0 = time.Now()
		val = stamp(f.value, 0, t0)
		if rev, err = n.leases.Update(cctx, leaseKey(f.p), val, e.Revision()); err != nil {
			return
		}
	}
	n.mu.Lock()
	if cur, ok := n.fenced[f.p]; !ok || cur.rev != f.rev || n.owners[f.p] != nil {
		n.mu.Unlock()
		return
	}
	delete(n.fenced, f.p)
	o := newOwner(n, f.p, f.value, rev, t0)
	n.owners[f.p] = o
	n.mu.Unlock()
	n.met.takeovers.Inc()
	n.log.Info("cluster: partition owned again: its lease, still this node's, was renewed", "node", n.opt.Node, "partition", f.p, "fenced_for", time.Since(f.fenced).Round(time.Millisecond))
	go o.run(n.ownCtx)
}

// dropFenced forgets a fenced lease (expired or another node's).
func (n *Node) dropFenced(f fencedLease) {
	n.mu.Lock()
	if cur, ok := n.fenced[f.p]; ok && cur.rev == f.rev {
		delete(n.fenced, f.p)
	}
	n.mu.Unlock()
}

// fenceMargin is how long before its lease can be taken an owner that
// could not renew it stops (its deadline, owner.lapsed): the server lets
// a lease expire LeaseTTL after the last renewal it stored, which it
// stored after the owner sent it, and a taker takes it over LeaseTTL +
// maxSkew after that renewal's own time and its server timestamp
// (takeStale). The margin covers the owner's stop (the fetch in flight)
// on a busy machine.
func (n *Node) fenceMargin() time.Duration { return n.opt.LeaseTTL / 4 }

// maxSkew is how far the nodes' clocks (and the bucket servers') may be
// apart for a takeover by the renewal's recorded time (takeStale) to be
// safe: a taker waits this long beyond LeaseTTL, and the owner stopped
// fenceMargin before LeaseTTL by its own clock, so clocks may differ by
// up to maxSkew + fenceMargin less the owner's stop (NTP keeps them
// within milliseconds).
const maxSkew = time.Second

// renewOne renews o's lease; its attempt ends at the fence deadline.
func (n *Node) renewOne(ctx context.Context, o *owner) {
	n.mu.Lock()
	renewed, rev := o.renewed, o.rev
	n.mu.Unlock()
	deadline := renewed.Add(n.opt.LeaseTTL - n.fenceMargin())
	t0 := time.Now()
	if !t0.Before(deadline) {
		// Not renewed in time (the process was paused, or every attempt
		// failed): another node may hold the lease by now.
		n.fence(o, "its lease could not be renewed before it expires", fmt.Errorf("last renewed %v ago", t0.Sub(renewed).Round(time.Millisecond)), true)
		return
	}
	end := t0.Add(n.opt.LeaseTTL / 4)
	if deadline.Before(end) {
		end = deadline
	}
	cctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	val := stamp(o.value, o.purged.Load(), t0)
	newRev, err := n.leases.Update(cctx, leaseKey(o.p), val, rev)
	if err != nil && isWrongSequence(err) {
		// A renewal whose answer was lost (a timeout after the server
		// stored it) leaves o.rev behind: when the lease still holds
		// this owner's value, take its revision and renew again.
		if e, gerr := n.leases.Get(cctx, leaseKey(o.p)); gerr == nil && o.holds(e.Value()) {
			newRev, err = n.leases.Update(cctx, leaseKey(o.p), val, e.Revision())
		}
	}
	n.mu.Lock()
	mine := n.owners[o.p] == o
	if err == nil {
		o.renewedAt(newRev, t0)
		if f, ok := n.fenced[o.p]; !mine && ok && f.rev == rev {
			// The owner stopped at its deadline while this renewal was
			// under way, and the renewal was stored: the lease is still
			// this node's, at the new revision, for reclaim.
			f.rev, f.renewed = newRev, t0
			n.fenced[o.p] = f
		}
	}
	n.mu.Unlock()
	if !mine {
		return // fenced meanwhile (its own deadline)
	}
	starts := false
	if err != nil {
		starts = o.renewing.Fail()
	}
	switch {
	case err == nil:
		if f := o.renewing.Recover(); f > 0 {
			n.log.Info("cluster: lease renewed again", "node", n.opt.Node, "partition", o.p, "failures", f)
		}
	case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) || isWrongSequence(err):
		n.fence(o, "another node holds its lease now", err, false)
	case !time.Now().Before(deadline):
		n.fence(o, "its lease could not be renewed before it expires", err, true)
	case starts: // once until it is renewed or lost
		n.log.Warn("cluster: renewing a lease failed; retrying", "node", n.opt.Node, "partition", o.p, "err", err)
	}
}

// stamp is the lease value b (a take's) with checkpoint c (0: b's) and
// the renewal time at: the time the renewal (or take) was sent by its
// node's clock, from which takers count the lease's age (takeStale).
func stamp(b []byte, c uint64, at time.Time) []byte {
	var v leaseValue
	_ = json.Unmarshal(b, &v)
	if c > 0 {
		v.Checkpoint = c
	}
	v.Renewed = at
	out, _ := json.Marshal(v)
	return out
}

// holds reports whether a lease's value b is this owner's (whatever
// checkpoint and renewal time it carries).
func (o *owner) holds(b []byte) bool {
	if bytes.Equal(b, o.value) {
		return true
	}
	var v, mine leaseValue
	return json.Unmarshal(b, &v) == nil && json.Unmarshal(o.value, &mine) == nil && v.Node == mine.Node && v.Since.Equal(mine.Since)
}

// isWrongSequence reports JetStream's "wrong last sequence" (a lease
// updated by another node). Replicated streams answer it with either of
// two codes (10071, or 10164 when the check is made on a message still
// being replicated).
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// fence stops an owner that lost its lease and drops what it holds; keep:
// the lease may still be this node's in the bucket (not renewed in time,
// rather than taken by another node), for reclaim.
func (n *Node) fence(o *owner, why string, err error, keep bool) {
	if n.drop(o, why, err, keep) {
		o.stop(stopDrop)
	}
}

// drop takes a fenced owner out of the node's owners (once: false when it
// was no longer one of them) and logs it; the owner stops by itself
// (owner.run, past its deadline) or is stopped by fence.
func (n *Node) drop(o *owner, why string, err error, keep bool) bool {
	n.mu.Lock()
	if n.owners[o.p] != o {
		n.mu.Unlock()
		return false
	}
	delete(n.owners, o.p)
	if keep {
		n.fenced[o.p] = fencedLease{p: o.p, value: stamp(o.value, o.purged.Load(), o.renewed), rev: o.rev, renewed: o.renewed, fenced: time.Now()}
	}
	n.mu.Unlock()
	// Logged when decided (before the lease can be taken): the owner
	// takes no message after its current step (a fetch, at most
	// fetchWait, or the making of a reader, which reads nothing).
	n.log.Error("cluster: partition lost: "+why+"; stopping its reader and dropping what was not checkpointed", "node", n.opt.Node, "partition", o.p, "err", err)
	n.met.leasesLost.Inc()
	return true
}

// share is how many partitions this node should own: its fair part
// among the nodes alive.
func (n *Node) share() int {
	n.mu.Lock()
	alive := len(n.seen)
	n.mu.Unlock()
	// The heartbeats' watcher knows a death the moment the heartbeat
	// expires, where the listing (every TTL/4) learns it up to 3 s later;
	// it is trusted while it is current (it delivered this node's own
	// heartbeat, put every TTL/4, within TTL/2).
	if now := time.Now(); n.nodeExp.recent(n.opt.Node, now, n.opt.LeaseTTL/2) {
		alive = n.nodeExp.alive(now)
	}
	alive = max(alive, 1)
	if time.Since(n.started) < 2*n.opt.LeaseTTL {
		// While the cluster starts, the others' heartbeats may not be
		// in yet.
		alive = max(alive, n.opt.Expected)
	}
	return (n.opt.Partitions + alive - 1) / alive
}

// takeEvery is how often the takers look for the leases the watcher
// says are free (absent or expired); every TTL/2 (every second while the
// watcher is not current) they try them all (the watcher is a hint; the
// bucket's create decides).
const takeEvery = 200 * time.Millisecond

// takers takes free partitions up to this node's share until ctx ends,
// in a goroutine of its own: a create waiting for the bucket (its leader
// being elected) holds up neither the renewals nor the next round's
// heartbeat.
func (n *Node) takers(ctx context.Context) {
	tick := time.NewTicker(takeEvery)
	defer tick.Stop()
	var lastSweep time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		fresh := n.leaseExp.fresh(now, n.opt.LeaseTTL/2)
		// While the watcher is current it names the free leases; the
		// sweep of all of them is the fallback (a sweep over partitions
		// other nodes hold is a round of failing creates).
		every := time.Second
		if fresh {
			every = n.opt.LeaseTTL / 2
		}
		all := now.Sub(lastSweep) >= every
		if !all && !fresh {
			continue
		}
		if all {
			lastSweep = now
		}
		n.take(ctx, all)
	}
}

// take tries the free partitions (all: every partition not this node's)
// up to the node's share, several at once, within one round of at most
// 2 s.
func (n *Node) take(ctx context.Context, all bool) {
	share := n.share()
	n.mu.Lock()
	// A fenced lease is still held: reclaim renews it.
	held := len(n.owners) + len(n.fenced)
	n.mu.Unlock()
	if held >= share {
		return
	}
	// Start at a place of this node's own, so that nodes starting
	// together do not all reach for the same partitions.
	first := int(fnv64(n.opt.Node) % uint64(n.opt.Partitions))
	now := time.Now()
	var cands []int
	n.mu.Lock()
	for i := range n.opt.Partitions {
		p := (first + i) % n.opt.Partitions
		if _, mine := n.owners[p]; mine {
			continue
		}
		if _, fenced := n.fenced[p]; fenced {
			continue // still this node's in the bucket: reclaim renews it
		}
		if all || n.leaseExp.gone(leaseKey(p), now) {
			cands = append(cands, p)
		}
	}
	n.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	type won struct {
		p     int
		val   []byte
		rev   uint64
		t0    time.Time
		stale *leaseValue // the lease taken over (nil: created)
	}
	for len(cands) > 0 && held < share && cctx.Err() == nil {
		k := min(share-held, len(cands))
		wins := make([]*won, k)
		var wg sync.WaitGroup
		for i, p := range cands[:k] {
			wg.Go(func() {
				t0 := time.Now()
				val, _ := json.Marshal(leaseValue{Node: n.opt.Node, Since: t0, Renewed: t0})
				rev, err := n.leases.Create(cctx, leaseKey(p), val)
				var stale *leaseValue
				if errors.Is(err, jetstream.ErrKeyExists) {
					// Held, or past its time but not yet removed by the
					// bucket (whose new leader may remove it seconds late).
					rev, stale, err = n.takeStale(cctx, leaseKey(p), val)
				}
				if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
					// A creation whose answer was lost (a timeout after
					// the server stored it) leaves the lease this
					// node's, unknown to it: it would hold the partition
					// without owning it until the lease expires, and
					// outlive the node's release.
					gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					if e, gerr := n.leases.Get(gctx, leaseKey(p)); gerr == nil && bytes.Equal(e.Value(), val) {
						rev, err = e.Revision(), nil
					}
					cancel()
				}
				if err == nil {
					wins[i] = &won{p, val, rev, t0, stale}
				} // else held by another, or JetStream unavailable: next round
			})
		}
		wg.Wait()
		cands = cands[k:]
		for _, w := range wins {
			if w == nil {
				continue
			}
			o := newOwner(n, w.p, w.val, w.rev, w.t0)
			n.mu.Lock()
			n.owners[w.p] = o
			n.mu.Unlock()
			held++
			n.met.takeovers.Inc()
			if w.stale != nil {
				n.log.Info("cluster: partition taken", "node", n.opt.Node, "partition", w.p, "from", w.stale.Node, "renewed_ago", w.t0.Sub(w.stale.Renewed).Round(time.Millisecond))
			} else {
				n.log.Info("cluster: partition taken", "node", n.opt.Node, "partition", w.p)
			}
			go o.run(n.ownCtx)
		}
	}
}

// takeStale takes over the lease under key, held by another node or an
// earlier take, when by this node's clock both the renewal time recorded
// in it (leaseValue.Renewed) and the bucket's timestamp of it are more
// than LeaseTTL + maxSkew in the past: its owner stopped reading at its
// own deadline, fenceMargin before LeaseTTL after that renewal. It is an
// update checked against the revision read, so it fails when the holder
// renewed meanwhile, and another taker's fails when this one won. The
// bucket still removes an expired lease by itself (TTL after it stored
// it, on its leader's timer, which runs late after a leader election):
// this does not wait for it. ErrKeyExists: not taken (held, or gone and
// for a create).
func (n *Node) takeStale(ctx context.Context, key string, val []byte) (uint64, *leaseValue, error) {
	m, err := n.leaseOnLeader(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil, jetstream.ErrKeyExists // removed meanwhile: the next round creates it
	}
	if err != nil {
		return 0, nil, err
	}
	var v leaseValue
	if m.deleted() || json.Unmarshal(m.Data, &v) != nil || v.Renewed.IsZero() {
		// A delete marker (a create takes it), or a lease of an earlier
		// version: it expires.
		return 0, nil, jetstream.ErrKeyExists
	}
	now := time.Now()
	if now.Sub(v.Renewed) < n.opt.LeaseTTL+maxSkew || now.Sub(m.Time) < n.opt.LeaseTTL+maxSkew {
		return 0, nil, jetstream.ErrKeyExists
	}
	rev, err := n.leases.Update(ctx, key, val, m.Sequence)
	if isWrongSequence(err) {
		return 0, nil, jetstream.ErrKeyExists // renewed, or taken by another, meanwhile
	}
	return rev, &v, err
}

// storedMsg is a message of a stream as its leader answers a get.
type storedMsg struct {
	Subject  string    `json:"subject"`
	Sequence uint64    `json:"seq"`
	Header   []byte    `json:"hdrs,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	Time     time.Time `json:"time"`
}

// deleted reports whether m is a key-value bucket's delete or purge
// marker.
func (m *storedMsg) deleted() bool {
	if len(m.Header) == 0 {
		return false
	}
	h, err := nats.DecodeHeadersMsg(m.Header)
	return err == nil && h.Get("KV-Operation") != ""
}

// leaseOnLeader reads the last value of lease key from the lease
// bucket's leader, which decides a revision-checked update: the bucket's
// own Get is a direct get that any replica may answer, and a replica may
// have removed an expired lease that its leader, whose age check runs
// late after an election, still holds (its create then fails, and a
// takeover read from that replica would never come). ErrKeyNotFound: the
// leader holds no value under key.
func (n *Node) leaseOnLeader(ctx context.Context, key string) (*storedMsg, error) {
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{"$KV." + LeaseBucket + "." + key})
	resp, err := n.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+LeaseBucket, req)
	if err != nil {
		return nil, fmt.Errorf("lease %s: %w", key, err)
	}
	var r struct {
		Message *storedMsg          `json:"message"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("lease %s: %w", key, err)
	}
	switch {
	case r.Error != nil && r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrKeyNotFound
	case r.Error != nil:
		return nil, fmt.Errorf("lease %s: %w", key, r.Error)
	case r.Message == nil:
		return nil, fmt.Errorf("lease %s: %w", key, jetstream.ErrInvalidJetStreamResponse)
	}
	return r.Message, nil
}

// rebalance gives one partition back when this node holds more than its
// share and a node holds fewer.
func (n *Node) rebalance(ctx context.Context) {
	share := n.share()
	n.mu.Lock()
	held := len(n.owners)
	n.mu.Unlock()
	if held > share+1 || held > share && n.someoneBelow(share) {
		n.release(ctx, share)
	}
}

// someoneBelow reports whether a node alive owns fewer than share. (A
// node that holds more than share gives one to it: takers take up to
// share, so no node at share takes it, and the move makes no node hold
// more than share: 4/2/2 of 8 partitions becomes 3/3/2, and stays.)
func (n *Node) someoneBelow(share int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.seen {
		if s.Owned < share {
			return true
		}
	}
	return false
}

// release gives back one partition: it checkpoints it, then deletes its
// lease, so that a node with fewer takes it at once.
func (n *Node) release(ctx context.Context, share int) {
	n.mu.Lock()
	var o *owner
	for _, x := range n.owners {
		if o == nil || x.p > o.p {
			o = x
		}
	}
	if o != nil {
		delete(n.owners, o.p)
	}
	n.mu.Unlock()
	if o == nil {
		return
	}
	n.handOver(ctx, o)
	n.log.Info("cluster: partition handed over (rebalancing)", "node", n.opt.Node, "partition", o.p, "share", share)
}

// handOver stops an owner, checkpoints it up to its safe point (the
// traces still open are left in the stream for the next owner, which
// reads on from there while the receivers go on) and deletes its lease.
//
// An owner past its deadline (owner.lapsed: its renewals did not succeed
// in time) is not handed over but stopped as a fenced one, dropping what
// it holds, and its messages are not purged when the checkpoint ends past
// the deadline (Persist may take up to 30 s, during which the lease is
// not renewed: another node may read the partition by then). Its lease
// is deleted all the same if it is still this node's (revision-checked).
func (n *Node) handOver(ctx context.Context, o *owner) {
	if o.lapsed() {
		o.stop(stopDrop)
		n.log.Error("cluster: partition lost: its lease was not renewed by its deadline; dropping what was not checkpointed instead of handing it over", "node", n.opt.Node, "partition", o.p)
		n.met.leasesLost.Inc()
	} else {
		safe := o.stop(stopSafe)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		switch err := n.opt.Persist(cctx); {
		case err != nil:
			n.log.Error("cluster: persisting a partition handed over failed; its records stay in the stream for the next owner", "node", n.opt.Node, "partition", o.p, "err", err)
		case o.lapsed():
			n.log.Warn("cluster: a partition's hand-over outlasted its lease's deadline; its records stay in the stream for the next owner (read again, and deduplicated)", "node", n.opt.Node, "partition", o.p)
		default:
			n.purge(cctx, []*owner{o}, []uint64{safe})
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := n.deleteLease(cctx, o); err != nil {
		n.log.Warn("cluster: releasing a lease failed (it expires by itself)", "node", n.opt.Node, "partition", o.p, "err", err)
	}
}

// deleteLease deletes o's lease if it still holds o's value. A renewal
// whose answer was lost (a timeout after the server stored it) leaves
// o.rev behind, and the delete, checked against it, would fail and leave
// the lease to expire: then the lease's revision is read again.
func (n *Node) deleteLease(ctx context.Context, o *owner) error {
	n.mu.Lock()
	rev := o.rev
	n.mu.Unlock()
	err := n.leases.Delete(ctx, leaseKey(o.p), jetstream.LastRevision(rev))
	if err != nil && isWrongSequence(err) {
		if e, gerr := n.leases.Get(ctx, leaseKey(o.p)); gerr == nil && o.holds(e.Value()) {
			err = n.leases.Delete(ctx, leaseKey(o.p), jetstream.LastRevision(e.Revision()))
		}
	}
	return err
}

// releaseAll hands every partition over (the node stops).
func (n *Node) releaseAll() {
	n.mu.Lock()
	owners := make([]*owner, 0, len(n.owners))
	for p, o := range n.owners {
		owners = append(owners, o)
		delete(n.owners, p)
	}
	fenced := make([]fencedLease, 0, len(n.fenced))
	for p, f := range n.fenced {
		fenced = append(fenced, f)
		delete(n.fenced, p)
	}
	n.mu.Unlock()
	if len(fenced) > 0 {
		// Leases still this node's whose owners were fenced: nothing of
		// theirs is assembled; free them for the others now.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for _, f := range fenced {
			_ = n.leases.Delete(ctx, leaseKey(f.p), jetstream.LastRevision(f.rev))
		}
		cancel()
	}
	if len(owners) == 0 {
		// Nothing to hand over; the heartbeat goes all the same, or the
		// others would see this node die rather than leave.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.nodes.Delete(ctx, n.opt.Node)
		return
	}
	// With other nodes alive, the owners stop at their safe points: the
	// traces still open stay in the stream for the next owners, which
	// assemble them whole with the records the receivers of the other
	// nodes go on taking (a rolling restart splits no trace). The last
	// node hands on everything it holds, open traces as they are.
	mode := stopAll
	if n.othersAlive() {
		mode = stopSafe
	}
	var wg sync.WaitGroup
	safes := make([]uint64, len(owners))
	for i, o := range owners {
		wg.Add(1)
		go func() { defer wg.Done(); safes[i] = o.stop(mode) }()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := n.opt.Persist(ctx)
	if err == nil {
		n.purge(ctx, owners, safes)
	}
	for _, o := range owners {
		wg.Go(func() {
			if derr := n.deleteLease(ctx, o); derr != nil {
				n.log.Warn("cluster: releasing a lease failed (it expires by itself)", "node", n.opt.Node, "partition", o.p, "err", derr)
			}
		})
	}
	wg.Wait()
	if err != nil {
		n.log.Error("cluster: the last checkpoint failed; the partitions' records stay in the stream for their next owners", "node", n.opt.Node, "err", err)
	} else {
		n.log.Info("cluster: partitions checkpointed and released", "node", n.opt.Node, "partitions", len(owners), "open_traces_left_to_others", mode == stopSafe)
	}
	_ = n.nodes.Delete(ctx, n.opt.Node)
}

// othersAlive reports whether a node other than this one is alive (its
// heartbeat seen and not expired).
func (n *Node) othersAlive() bool {
	if now := time.Now(); n.nodeExp.recent(n.opt.Node, now, n.opt.LeaseTTL/2) {
		return n.nodeExp.alive(now) > 1
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, st := range n.seen {
		if st.Name != n.opt.Node {
			return true
		}
	}
	return false
}

// checkpoints runs a checkpoint every CheckpointInterval.
func (n *Node) checkpoints(ctx context.Context) {
	tick := time.NewTicker(n.opt.CheckpointInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n.checkpoint(ctx)
	}
}

// refreshes reads the stream's state and the leases every
// CheckpointInterval, beside the checkpoints (a checkpoint waiting for an
// unreachable store must not freeze the lag and the status).
func (n *Node) refreshes(ctx context.Context) {
	tick := time.NewTicker(n.opt.CheckpointInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n.refreshStream(ctx)
	}
}

// checkpoint asks every owner for the last message all of whose
// records are in traces handed to the sink, makes the sink's traces
// durable (Persist), then removes those messages from the stream.
func (n *Node) checkpoint(ctx context.Context) {
	if !n.owns() {
		return
	}
	n.mu.Lock()
	owners := make([]*owner, 0, len(n.owners))
	for _, o := range n.owners {
		owners = append(owners, o)
	}
	n.mu.Unlock()
	safes := make([]uint64, len(owners))
	progress := false
	for i, o := range owners {
		safes[i] = o.safe(ctx)
		if safes[i] > o.purged.Load() {
			progress = true
		}
	}
	if !progress {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t0 := time.Now()
	n.mu.Lock()
	n.ckBegan = t0
	n.mu.Unlock()
	err := n.opt.Persist(cctx)
	n.mu.Lock()
	n.ckBegan = time.Time{}
	prev := n.ckErr
	n.ckErr = err
	if err == nil {
		n.lastCk = time.Now()
	}
	n.mu.Unlock()
	n.met.checkpointSeconds.Observe(time.Since(t0).Seconds())
	if err != nil {
		n.met.checkpointErrors.Inc()
		if prev == nil {
			n.log.Error("cluster: checkpoint failed: the store's blocks are not durable; the partitions' records stay in the stream", "node", n.opt.Node, "partitions", len(owners), "err", err)
		}
		return
	}
	if prev != nil {
		n.log.Info("cluster: checkpoints succeed again", "node", n.opt.Node)
	}
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	for i, missed := range n.purge(pctx, owners, safes) {
		if missed > 0 {
			n.reread(owners[i])
		}
	}
}

// purge removes each owner's messages up to its safe point (safes[i]
// for owners[i]) from the stream, once unread has found each of them
// among those the owner took. It returns, for each owner, the first
// message up to its safe point that the owner did not take (0: none, or
// the check could not tell, and then nothing of its partition is removed
// until a later checkpoint).
func (n *Node) purge(ctx context.Context, owners []*owner, safes []uint64) []uint64 {
	missed := make([]uint64, len(owners))
	checks := make([]check, 0, len(owners))
	for i, o := range owners {
		if from := o.purged.Load(); safes[i] > from {
			checks = append(checks, check{o: o, at: i, from: from, upto: safes[i], read: o.readUpTo(safes[i])})
		}
	}
	if len(checks) == 0 {
		return missed
	}
	err := n.unread(ctx, checks)
	var wg sync.WaitGroup
	for _, c := range checks {
		o := c.o
		if !c.told {
			if o.checking.Fail() {
				n.log.Warn("cluster: the partition's messages could not be checked before their removal; they stay in the stream until a checkpoint can", "node", n.opt.Node, "partition", o.p, "err", err)
			}
			continue
		}
		if o.checking.Failures() > 0 {
			if f := o.checking.Recover(); f > 0 {
				n.log.Info("cluster: the partition's messages are checked again before their removal", "node", n.opt.Node, "partition", o.p, "failures", f)
			}
		}
		if c.missed > 0 {
			n.met.skipped.Inc()
			n.log.Error("cluster: the partition's reader skipped a message the stream holds; it is not removed, and the partition is read again from its first message (what was read twice is deduplicated)", "node", n.opt.Node, "partition", o.p, "seq", c.missed, "safe", c.upto)
			missed[c.at] = c.missed
			continue
		}
		wg.Go(func() {
			err := n.stream.Purge(ctx, jetstream.WithPurgeSubject(Subject(o.p)), jetstream.WithPurgeSequence(c.upto+1))
			if err != nil {
				n.log.Warn("cluster: removing checkpointed messages failed (they are read again by a later owner, and deduplicated)", "node", n.opt.Node, "partition", o.p, "err", err)
				return
			}
			o.purgedTo(c.upto)
		})
	}
	wg.Wait()
	return missed
}

// check is unread's question for one partition: are all its messages
// after from and up to upto among read (the ascending sequences its
// owner took)?
type check struct {
	o          *owner
	at         int // the owner's index in purge's arguments
	from, upto uint64
	read       []uint64
	next       int // read[next]: the next message taken the check may meet

	told   bool   // the answer is known
	missed uint64 // the first message not taken (told; 0: none)
}

// meet compares the partition's message s with those taken.
func (c *check) meet(s uint64) {
	if c.told || s <= c.from || s > c.upto {
		return
	}
	for c.next < len(c.read) && c.read[c.next] < s {
		c.next++ // (removed meanwhile by a former owner's checkpoint)
	}
	if c.next == len(c.read) || c.read[c.next] != s {
		c.missed, c.told = s, true
	}
}

// unread answers checks (check.told, check.missed) by reading the
// partitions' messages again, headers only, with one consumer of its
// own for all of them: a partition's consumer may skip a message (a
// JetStream replica that lagged behind, on a loaded machine, was seen to
// resume its delivery past messages it held), and a checkpoint that
// removed up to a later one would lose it; this second reading, from
// another consumer, is what a removal waits for. The consumer delivers
// the partitions' messages in the stream's order, so a message past a
// check's upto tells it that all of its own were seen. The error says
// why some checks were not told.
func (n *Node) unread(ctx context.Context, checks []check) error {
	bySubject := make(map[string]*check, len(checks))
	subjects := make([]string, 0, len(checks))
	start := uint64(math.MaxUint64)
	for k := range checks {
		c := &checks[k]
		s := Subject(c.o.p)
		bySubject[s] = c
		subjects = append(subjects, s)
		start = min(start, c.from+1)
	}
	cfg := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		HeadersOnly:       true,
		InactiveThreshold: 10 * time.Second,
		MemoryStorage:     true,
		Replicas:          1,
	}
	if len(subjects) == 1 {
		cfg.FilterSubject = subjects[0]
	} else {
		cfg.FilterSubjects = subjects
	}
	if start > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	pending := len(checks)
	settle := func(upto uint64) { // every check whose messages end by upto is told (0: none)
		for k := range checks {
			if c := &checks[k]; !c.told && c.upto <= upto {
				c.told = true
				pending--
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, checkWait)
	defer cancel()
	cons, err := n.js.CreateConsumer(cctx, StreamName, cfg)
	if err != nil {
		return fmt.Errorf("partitions %v: %w", subjects, err)
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer dcancel()
		_ = n.js.DeleteConsumer(dctx, StreamName, cons.CachedInfo().Name)
	}()
	var last uint64 // the last message delivered
	// avail: the messages the consumer has yet to deliver, as its
	// server last said; a fetch asks for no more, so it returns once
	// they came rather than after waiting for more.
	avail := cons.CachedInfo().NumPending
	for pending > 0 {
		got := 0
		if avail > 0 {
			batch, err := cons.Fetch(int(min(avail, fetchBatch*4)), jetstream.FetchMaxWait(fetchWait))
			if err != nil {
				return fmt.Errorf("partitions %v: %w", subjects, err)
			}
			for msg := range batch.Messages() {
				got++
				meta, err := msg.Metadata()
				if err != nil {
					continue
				}
				s := meta.Sequence.Stream
				if c := bySubject[msg.Subject()]; c != nil && !c.told {
					c.meet(s)
					if c.told {
						pending--
					}
				}
				last = max(last, s)
			}
			avail -= min(avail, uint64(got))
			settle(last)
			if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				return fmt.Errorf("partitions %v: %w", subjects, err)
			}
		}
		if got > 0 || pending == 0 {
			continue
		}
		// Nothing more: the consumer's server holds no later message
		// of the partitions; each check is told if it has the stream
		// as far as the check's upto.
		info, err := cons.Info(cctx)
		if err != nil {
			return fmt.Errorf("partitions %v: %w", subjects, err)
		}
		if avail = info.NumPending; avail == 0 {
			settle(info.Delivered.Stream)
		}
		if pending == 0 {
			break
		}
		if avail == 0 {
			// A server behind the stream's leader: wait for it.
			select {
			case <-cctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		if cctx.Err() != nil {
			return fmt.Errorf("partitions %v: not all the messages up to the checkpoint were seen within %v", subjects, checkWait)
		}
	}
	return nil
}

// checkWait bounds unread.
const checkWait = 10 * time.Second

// reread replaces owner o, whose reader skipped a message (purge), with
// a new owner of the same lease, which reads the partition again from its
// first message in the stream: o stops and drops what it assembled (its
// completed traces are in the store; read twice, they are deduplicated).
func (n *Node) reread(o *owner) {
	n.mu.Lock()
	if n.owners[o.p] != o {
		n.mu.Unlock()
		return
	}
	no := newOwner(n, o.p, o.value, o.rev, o.renewed)
	no.since, no.holdFor = o.since, o.holdFor
	no.purged.Store(o.purged.Load())
	n.owners[o.p] = no
	n.mu.Unlock()
	o.stop(stopDrop)
	go no.run(n.ownCtx)
}

// refreshStream reads the stream's state and the leases for Status and
// the metrics.
func (n *Node) refreshStream(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	info, err := n.stream.Info(cctx, jetstream.WithSubjectFilter(subjectPrefix+"*"))
	lag := map[int]uint64{}
	if err == nil {
		for s, c := range info.State.Subjects {
			if p, e := strconv.Atoi(s[len(subjectPrefix):]); e == nil {
				lag[p] = c
			}
		}
	}
	leaseOf := map[int]leaseValue{}
	if lister, lerr := n.leases.ListKeys(cctx); lerr == nil {
		for k := range lister.Keys() {
			p, perr := strconv.Atoi(k[1:])
			if perr != nil {
				continue
			}
			if e, gerr := n.leases.Get(cctx, k); gerr == nil {
				var v leaseValue
				if json.Unmarshal(e.Value(), &v) == nil {
					leaseOf[p] = v
				}
			}
		}
	}
	// A listing cut short (the bucket electing a leader after a node's
	// death) misses leases still held: ask for each one it missed rather
	// than show its partition without owner.
	n.mu.Lock()
	before := n.leaseOf
	n.mu.Unlock()
	for p, v := range before {
		if _, ok := leaseOf[p]; ok {
			continue
		}
		e, gerr := n.leases.Get(cctx, leaseKey(p))
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			// released or expired
		case gerr != nil:
			leaseOf[p] = v // no answer now: as it was
		default:
			var nv leaseValue
			if json.Unmarshal(e.Value(), &nv) == nil {
				leaseOf[p] = nv
			}
		}
	}
	n.mu.Lock()
	n.sinfo, n.sErr = info, err
	if err == nil {
		n.lag, n.lagAt = lag, time.Now()
	}
	n.leaseOf = leaseOf
	n.mu.Unlock()
}

// noOwner is the degraded line of the partitions ps (ascending) that have
// no owner: one line, its runs written as ranges ("partitions 0–31 have
// no owner" rather than 32 lines).
func noOwner(ps []int) string {
	if len(ps) == 1 {
		return fmt.Sprintf("partition %d has no owner", ps[0])
	}
	b := []byte("partitions ")
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(ps[i]), 10)
		if j > i {
			b = append(b, "–"...)
			b = strconv.AppendInt(b, int64(ps[j]), 10)
		}
		i = j + 1
	}
	return string(append(b, " have no owner"...))
}

// Status describes the cluster as this node knows it (the stream's
// state and the leases as of the last checkpoint round).
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := Status{Node: n.opt.Node, Partitions: n.opt.Partitions, Replicas: n.opt.Replicas, Nodes: slices.Clone(n.seen), At: time.Now()}
	var unowned []int
	for p := range n.opt.Partitions {
		ps := PartitionStatus{Partition: p, Lag: n.lag[p]}
		if v, ok := n.leaseOf[p]; ok {
			ps.Owner, ps.Since, ps.Checkpoint = v.Node, v.Since, v.Checkpoint
		}
		if o := n.owners[p]; o != nil {
			ps.Owner, ps.Since, ps.Checkpoint = n.opt.Node, o.since, o.purged.Load()
		}
		if ps.Owner == "" {
			unowned = append(unowned, p)
		}
		st.Owners = append(st.Owners, ps)
	}
	if len(unowned) > 0 {
		st.Degraded = append(st.Degraded, noOwner(unowned))
	}
	for _, g := range n.gone {
		st.Gone = append(st.Gone, g)
	}
	slices.SortFunc(st.Gone, func(a, b NodeStatus) int { return cmpString(a.Name, b.Name) })
	for _, g := range st.Gone {
		st.Degraded = append(st.Degraded, fmt.Sprintf("node %s gone since %s (its heartbeat expired)", g.Name, g.Seen.UTC().Format(time.TimeOnly)))
	}
	if n.beatErr != nil {
		st.Degraded = append(st.Degraded, fmt.Sprintf("this node's heartbeat fails since %s (cut off from the cluster's quorum?): %v; what it shows may be stale", n.beatFailing.UTC().Format(time.TimeOnly), n.beatErr))
	}
	st.Stream = StreamStatus{Name: StreamName, PublishErrors: n.met.publishErrorCount(), FullRefusals: n.met.fullCount()}
	stale := 3 * max(n.opt.CheckpointInterval, 5*time.Second)
	switch {
	case !n.ready:
		st.Stream.Error = "JetStream not ready (the cluster needs a quorum of its servers)"
		if why := n.notConnected(); why != "" {
			st.Stream.Error = why
		}
	case n.sErr != nil:
		st.Stream.Error = n.sErr.Error()
	case !n.lagAt.IsZero() && time.Since(n.lagAt) > stale:
		// The checkpoint round that reads it is stuck (purges waiting for
		// a stream without quorum).
		st.Stream.Error = fmt.Sprintf("no answer since %s", n.lagAt.UTC().Format(time.TimeOnly))
	case n.sinfo != nil:
		st.Stream.OK = true
		st.Stream.Messages, st.Stream.Bytes = n.sinfo.State.Msgs, n.sinfo.State.Bytes
		if mb := n.sinfo.Config.MaxBytes; mb > 0 {
			st.Stream.MaxBytes = uint64(mb)
			used := float64(st.Stream.Bytes) / float64(mb)
			switch {
			case used >= full || n.met.refusedSince(2*n.opt.CheckpointInterval):
				st.Stream.Full = true
				st.Degraded = append(st.Degraded, fmt.Sprintf("stream full: %s of %s (stream_max_bytes): publishers are refused until checkpoints catch up", sizeText(st.Stream.Bytes), sizeText(uint64(mb))))
			case used >= nearFull:
				st.Degraded = append(st.Degraded, fmt.Sprintf("stream near full: %s of %s (stream_max_bytes): checkpoints are behind", sizeText(st.Stream.Bytes), sizeText(uint64(mb))))
			}
		}
		if c := n.sinfo.Cluster; c != nil {
			st.Stream.Leader = c.Leader
			for _, r := range c.Replicas {
				st.Stream.Replicas = append(st.Stream.Replicas, ReplicaStatus{Name: r.Name, Current: r.Current, Offline: r.Offline, Lag: r.Lag, Active: r.Active})
				if r.Offline || !r.Current {
					st.Degraded = append(st.Degraded, fmt.Sprintf("stream replica %s is not current", r.Name))
				}
			}
		}
	}
	if !st.Stream.OK {
		st.Degraded = append(st.Degraded, "stream: "+st.Stream.Error)
	}
	st.Store = StoreStatus{OK: n.ckErr == nil, LastCheckpoint: n.lastCk}
	switch {
	case !n.ckBegan.IsZero() && time.Since(n.ckBegan) > 2*n.opt.CheckpointInterval:
		// A checkpoint waits for the store (up to a minute before it
		// fails): unreachable, or slow.
		st.Store.OK = false
		st.Store.Error = fmt.Sprintf("a checkpoint has waited for the store since %s", n.ckBegan.UTC().Format(time.TimeOnly))
		st.Degraded = append(st.Degraded, "store: "+st.Store.Error)
	case n.ckErr != nil:
		st.Store.Error = n.ckErr.Error()
		st.Degraded = append(st.Degraded, "store: checkpoints fail: "+n.ckErr.Error())
	}
	return st
}

// Close closes the connection (after Run has returned). It is safe to
// call twice.
func (n *Node) Close() error {
	n.nc.Close()
	return nil
}

// nodeMetrics are the node's Prometheus metrics.
type nodeMetrics struct {
	published, publishErrors prometheus.Counter
	takeovers, leasesLost    prometheus.Counter
	checkpointErrors         prometheus.Counter
	checkpointSeconds        prometheus.Histogram
	owned                    prometheus.GaugeFunc
	consumed                 prometheus.Counter
	malformed                prometheus.Counter
	duplicates               prometheus.Counter
	readErrors               prometheus.Counter
	skipped                  prometheus.Counter
	n                        *Node
	lagCollector             prometheus.Collector
	pubErrs                  atomic.Int64
	fullRefusals             prometheus.Counter
	fulls                    atomic.Int64
	fullAt                   atomic.Int64 // unix ns of the last refusal
}

func newNodeMetrics(n *Node) *nodeMetrics {
	m := &nodeMetrics{n: n}
	m.published = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_published_messages_total", Help: "Messages this node published to the cluster's stream."})
	m.publishErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_publish_errors_total", Help: "Publishes to the cluster's stream that failed (their sources were not acknowledged)."})
	m.takeovers = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_partitions_taken_total", Help: "Partition leases this node took."})
	m.leasesLost = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_leases_lost_total", Help: "Partitions this node lost (fenced) because it could not renew their lease."})
	m.checkpointErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_checkpoint_errors_total", Help: "Checkpoints that failed (blocks not durable in the shared store)."})
	m.checkpointSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tracebridge_cluster_checkpoint_seconds", Help: "Time to make the owned partitions' traces durable blocks.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)})
	m.fullRefusals = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_stream_full_refusals_total", Help: "Messages this node published that the stream refused because it was full (stream_max_bytes)."})
	m.consumed = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_consumed_messages_total", Help: "Messages of owned partitions this node consumed."})
	m.malformed = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_malformed_messages_total", Help: "Messages of owned partitions that did not decode (skipped)."})
	m.duplicates = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_duplicate_sections_total", Help: "Sections of messages (a batch's records of a partition) this node's owners dropped because they had seen the same within the duplicate window (clients' retries)."})
	m.readErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_read_errors_total", Help: "Failed reads of owned partitions (a consumer not made, lost or stalled: read again from where it was)."})
	m.skipped = prometheus.NewCounter(prometheus.CounterOpts{Name: "tracebridge_cluster_skipped_messages_total", Help: "Checkpoints that found a message of an owned partition its reader had skipped (not removed; the partition read again)."})
	m.owned = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tracebridge_cluster_owned_partitions", Help: "Partitions this node owns."}, func() float64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		return float64(len(n.owners))
	})
	m.lagCollector = lagCollector{n}
	return m
}

func (m *nodeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.published, m.publishErrors, m.fullRefusals, m.takeovers, m.leasesLost, m.checkpointErrors, m.checkpointSeconds, m.consumed, m.malformed, m.duplicates, m.readErrors, m.skipped, m.owned, m.lagCollector}
}

func (m *nodeMetrics) publishErrorCount() int64 { return m.pubErrs.Load() }

func (m *nodeMetrics) fullCount() int64 { return m.fulls.Load() }

// refused counts k messages the full stream refused.
func (m *nodeMetrics) refused(k int) {
	m.fulls.Add(int64(k))
	m.fullRefusals.Add(float64(k))
	m.fullAt.Store(time.Now().UnixNano())
}

// refusedSince reports whether the stream refused a message of this node
// as full within the last d.
func (m *nodeMetrics) refusedSince(d time.Duration) bool {
	at := m.fullAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < d
}

// publishError counts k failed publishes.
func (m *nodeMetrics) publishError(k int) {
	m.pubErrs.Add(int64(k))
	m.publishErrors.Add(float64(k))
}

// lagCollector reports each partition's lag (messages not yet
// checkpointed) as of the last checkpoint round.
type lagCollector struct{ n *Node }

var lagDesc = prometheus.NewDesc("tracebridge_cluster_partition_lag_messages", "Messages of a partition in the cluster's stream not yet checkpointed (in blocks of the shared store).", []string{"partition"}, nil)

var lagAtDesc = prometheus.NewDesc("tracebridge_cluster_partition_lag_timestamp_seconds", "When the partitions' lag was last read from the stream (unix time): a value that stops moving means the stream does not answer.", nil, nil)

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- lagDesc; ch <- lagAtDesc }

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.n.lag == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(lagAtDesc, prometheus.GaugeValue, float64(c.n.lagAt.UnixNano())/1e9)
	for p := range c.n.opt.Partitions {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(c.n.lag[p]), strconv.Itoa(p))
	}
}

// fnv64 is FNV-1a of s (stable across processes, unlike maphash).
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
