package stream

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/control"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Factory returns the factory of stream sinks (best-effort).
func Factory() pipeline.SinkFactory {
	return pipeline.NewSinkFactory(Type, pipeline.BestEffort, func() *Config { return &Config{} },
		func(c *Config, set pipeline.Settings) (pipeline.BuiltSink, error) { return New(c, set) })
}

// Version is what the metadata gives as the bridge's version; main sets
// it.
var Version = ""

// Limits of publishing.
const (
	// maxChunk is the most records published as one batch; larger
	// batches are cut.
	maxChunk = 4096
	// setupTimeout bounds connecting and creating the streams at start.
	setupTimeout = 10 * time.Second
	// metaRefresh: last-seen times are republished at most this often.
	metaRefresh = time.Minute
	// expiryMargin: a type or host leaves the metadata this long after
	// the retention removed its last record.
	expiryMargin = time.Hour
)

// Sink publishes batches to the stream.
type Sink struct {
	cfg   Config
	name  string
	log   *slog.Logger
	subj  streammsg.Subjects
	where string
	json  bool

	srv     *natsd.Server // the embedded server, or nil
	nodeHdr []string      // a cluster node's name, as its messages' NodeHeader (read only)
	creds   natsd.Credentials
	release func()
	nc      *natsgo.Conn
	js      jetstream.JetStream
	token   []byte
	ctlSub  *natsgo.Subscription

	ready     atomic.Bool // streams exist, metadata loaded
	loaded    bool        // setup ran once (s.mu): Unclosed is taken from the last run
	reconnect atomic.Bool // the connection came back: streams and metadata again

	mu       sync.Mutex // guards what follows
	meta     *metaState
	lastMeta *streammsg.Metadata // last version published
	metaAt   time.Time
	expireAt time.Time
	enc      streammsg.Encoder
	ordinal  uint64
	subjects map[subjKey]*subjState
	parts    []part
	refs     []streammsg.PartRef
	maxMsg   int
	ctl      *control.Controller

	durable     bool          // policy: durable: Consume waits for room, Flush for acknowledgements
	batch       []outMsg      // what encode made, for the outbox (best-effort: under s.mu; durable: by Consume once s.mu is released)
	acks        chan ackWait  // publishes awaiting acknowledgement, in order (the bounded window)
	abort       chan struct{} // closed by Abort: a waiting Consume or Flush returns
	abortOnce   sync.Once
	queued      atomic.Uint64 // messages put into the outbox
	settled     atomic.Uint64 // of those: acknowledged, failed or dropped
	failed      atomic.Uint64 // of those: failed (a durable Flush reports them)
	progress    chan struct{} // has a value when settled moved
	flushFailed uint64        // failed as of the last Flush (Flush's goroutine)
	backlog     func() int    // batches waiting in the engine's queue in front of the sink (nil: not told)
	acc         record.Batch  // best-effort: batches of one origin packed into one while more wait (s.mu)
	packed      atomic.Uint64 // batches packed with the ones before them

	pubMeta   atomic.Uint64 // the last metadata version published
	lost      atomic.Uint64 // records not published in this run
	published atomic.Uint64 // records handed to the server
	unacked   atomic.Uint64 // messages whose acknowledgement failed

	out       *outbox
	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
	warn      lograte.Limiter
}

type subjKey struct {
	id   uint32
	host string
}

type subjState struct {
	subject string
	ord     uint64
}

// part is the records of one (type, host) of a batch.
type part struct {
	ts   *typeState
	host string
	pos  []uint32
	data []byte
	sj   *subjState
}

// ackWait is a publish whose acknowledgement the acker waits for.
type ackWait struct {
	f jetstream.PubAckFuture
}

var (
	_ pipeline.Aborter       = (*Sink)(nil)
	_ pipeline.Backlogger    = (*Sink)(nil)
	_ pipeline.Sink          = (*Sink)(nil)
	_ pipeline.TraceConsumer = (*Sink)(nil)
	_ pipeline.Dropper       = (*Sink)(nil)
)

// New connects to the stream's NATS server (starting or sharing the
// bridge's embedded one), creates the streams, loads the repository's
// metadata and starts publishing. An external server that cannot be
// reached yet is not an error: the sink connects when it can, and counts
// what it could not publish until then.
func New(c *Config, set pipeline.Settings) (*Sink, error) {
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sink{
		cfg: *c, name: set.Name, log: set.Logger, subj: streammsg.Subjects{Prefix: c.SubjectPrefix},
		json: c.Encoding == "json", meta: newMetaState(), subjects: map[subjKey]*subjState{},
		quit: make(chan struct{}), done: make(chan struct{}), warn: lograte.Limiter{PerSecond: 1},
		durable: set.Policy == pipeline.Durable, abort: make(chan struct{}), progress: make(chan struct{}, 1),
	}
	if s.name == "" {
		s.name = Type
	}
	buf := int(c.Buffer)
	if buf <= 0 {
		buf = DefaultBuffer
	}
	s.out = newOutbox(buf)
	if c.ControlTokenFile != "" {
		tok, err := readToken(c.ControlTokenFile)
		if err != nil {
			return nil, pipeline.Classify(pipeline.ErrConfig, fmt.Errorf("stream: control_token_file: %w", err))
		}
		s.token = tok
	}
	if err := s.connect(set); err != nil {
		s.closeConn()
		return nil, err
	}
	s.ctl = control.Lookup(set.Shared)
	if s.ctl != nil {
		s.meta.m.Control = s.ctl.State()
		s.ctl.OnChange(s.onControl)
		s.ctl.SetKnownTypes(func() []string {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.meta.names()
		})
	}
	s.meta.m.Encoding = "binary"
	if s.json {
		s.meta.m.Encoding = "json"
	}
	s.meta.m.Bridge = Version
	s.meta.m.Subjects = streammsg.NewSubjectInfo(s.subj)
	if ct := c.Cluster; ct != nil {
		s.nodeHdr = []string{ct.Node}
		s.meta.m.Node = ct.Node
		s.meta.m.Subjects.Meta = s.metaSubject()
	}
	s.meta.m.Retention = streammsg.Retention{MaxAgeNs: int64(c.maxAge()), MaxBytes: c.maxBytes()}

	// A cluster node starts before JetStream has a quorum (the cluster's
	// NATS may still be forming): its publisher sets the streams up once
	// it can, as for an external server.
	if c.Cluster == nil {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		err := s.setup(ctx)
		cancel()
		if err != nil && s.srv != nil {
			s.closeConn()
			return nil, pipeline.Classify(pipeline.ErrComm, fmt.Errorf("stream: %w", err))
		}
		if err != nil {
			s.log.Warn("stream: NATS server not ready; publishing starts once it is (records until then are counted as lost)",
				"sink", s.name, "server", s.url(), "err", err)
		}
	}
	sub, err := s.nc.Subscribe(s.subj.Control(), s.handleControl)
	if err != nil {
		s.closeConn()
		return nil, pipeline.Classify(pipeline.ErrComm, fmt.Errorf("stream: control subject: %w", err))
	}
	s.ctlSub = sub
	s.acks = make(chan ackWait, s.maxPending())
	go s.acker()
	go s.publisher()
	return s, nil
}

func (s *Sink) url() string {
	if s.srv != nil {
		return "nats://" + s.srv.Addr()
	}
	if ct := s.cfg.Cluster; ct != nil {
		return ct.URL
	}
	u, err := url.Parse(s.cfg.URL)
	if err != nil {
		return s.cfg.URL
	}
	u.User = nil
	return u.String()
}

// connect starts or shares the embedded server, or dials the external
// one.
func (s *Sink) connect(set pipeline.Settings) error {
	opts := []natsgo.Option{
		natsgo.Name("tracebridge stream " + s.name),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250 * time.Millisecond),
		natsgo.ReconnectJitter(100*time.Millisecond, 500*time.Millisecond),
		natsgo.RetryOnFailedConnect(true),
		natsgo.ReconnectBufSize(-1), // the outbox buffers; a publish while disconnected fails
		natsgo.ConnectHandler(func(*natsgo.Conn) { s.wakeUp() }),
		natsgo.ReconnectHandler(func(*natsgo.Conn) {
			s.reconnect.Store(true)
			s.log.Info("stream: reconnected to the NATS server", "sink", s.name, "server", s.url())
			s.wakeUp()
		}),
		natsgo.DisconnectErrHandler(func(c *natsgo.Conn, err error) {
			if c.IsClosed() {
				return
			}
			s.log.Warn("stream: NATS server unreachable; holding records up to the buffer", "sink", s.name, "server", s.url(), "err", err)
		}),
	}
	target := ""
	if ct := s.cfg.Cluster; ct != nil {
		// A cluster node: the cluster's NATS, which the other nodes write
		// into as well. The embedded server is the cluster's (no release).
		if ct.Server != nil {
			s.srv, s.creds = ct.Server, ct.Server.Credentials()
			opts = append(opts, natsgo.InProcessServer(ct.Server.InProcess()), natsgo.UserInfo(s.creds.User, s.creds.Password))
		} else {
			opts = append(opts, ct.Login.Options()...)
			s.creds = natsd.Credentials{User: ct.Login.User, Password: ct.Login.Password}
			target = ct.URL
		}
	} else if s.cfg.URL == "" {
		listen, anyAddr := s.cfg.Listen, false
		if listen == "" {
			listen, anyAddr = DefaultListen, true
		}
		tc, err := s.cfg.TLS.ServerConfig()
		if err != nil {
			return err
		}
		host, port, _ := natsd.SplitListen(listen)
		srv, release, err := natsd.Acquire(set.Shared, natsd.Config{Host: host, Port: port, StoreDir: filepath.Join(set.DataDir, "broker"),
			CredentialsFile: natsd.CredentialsFile(set.DataDir), TLS: tc, Logger: set.Logger}, anyAddr)
		if err != nil {
			return pipeline.Classify(pipeline.ErrComm, fmt.Errorf("stream: %w", err))
		}
		s.srv, s.release = srv, release
		s.creds = srv.Credentials()
		opts = append(opts, natsgo.InProcessServer(srv.InProcess()), natsgo.UserInfo(s.creds.User, s.creds.Password))
	} else {
		u, _ := url.Parse(s.cfg.URL)
		user, pass := s.cfg.User, s.cfg.Password
		if u.User != nil {
			if user == "" {
				user = u.User.Username()
			}
			if p, ok := u.User.Password(); ok && pass == "" {
				pass = p
			}
			u.User = nil
		}
		if u.Port() == "" {
			u.Host += ":4222"
		}
		if user != "" {
			opts = append(opts, natsgo.UserInfo(user, pass))
		}
		s.creds = natsd.Credentials{User: user, Password: pass}
		target = u.String()
	}
	nc, err := natsgo.Connect(target, opts...)
	if err != nil {
		return pipeline.Classify(pipeline.ErrComm, fmt.Errorf("stream: %w", err))
	}
	s.nc = nc
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(s.maxPending()),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *natsgo.Msg, err error) {
			s.unacked.Add(1)
			s.warn.Log(context.Background(), s.log, slog.LevelWarn, "stream: a publish was not acknowledged; its records may be missing (subscribers see the gap)",
				"sink", s.name, "subject", m.Subject, "err", err)
		}))
	if err != nil {
		return pipeline.Classify(pipeline.ErrComm, fmt.Errorf("stream: %w", err))
	}
	s.js = js
	s.where = fmt.Sprintf("publishing to %s (stream %s, subjects %s.>)", s.url(), s.subj.Stream(), s.subjPrefix())
	return nil
}

// metaSubject is where the sink's metadata goes: PREFIX.meta, or a
// cluster node's PREFIX.meta.<node>.
func (s *Sink) metaSubject() string {
	if ct := s.cfg.Cluster; ct != nil {
		return s.subj.NodeMeta(ct.Node)
	}
	return s.subj.Meta()
}

// header is the NATS header of a message the sink publishes: a cluster
// node's name (streammsg.NodeHeader), so that subscribers tell the nodes'
// runs, counts and type ids apart; nil for a bridge that runs alone. A
// header of its own per message: the publish may add to it.
func (s *Sink) header() natsgo.Header {
	if s.nodeHdr == nil {
		return nil
	}
	return natsgo.Header{streammsg.NodeHeader: s.nodeHdr}
}

func (s *Sink) subjPrefix() string {
	if s.cfg.SubjectPrefix == "" {
		return streammsg.DefaultPrefix
	}
	return s.cfg.SubjectPrefix
}

func (s *Sink) maxPending() int {
	if s.cfg.MaxPending > 0 {
		return s.cfg.MaxPending
	}
	return 4096
}

// Where says where the stream is.
func (s *Sink) Where() string { return s.where }

// URL is the NATS URL subscribers use (without credentials).
func (s *Sink) URL() string { return s.url() }

// Credentials are what the bridge's own subscribers (the web UI's live
// view) present to the server: the embedded server's, or the
// configuration's for an external one.
func (s *Sink) Credentials() (user, password string) { return s.creds.User, s.creds.Password }

// SetReceivers describes the bridge's receivers in the metadata.
func (s *Sink) SetReceivers(rs []streammsg.ReceiverInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meta.setReceivers(rs)
	s.publishMetaLocked()
}

// setup creates the streams and, the first time, loads the repository's
// metadata and publishes the run's first version.
func (s *Sink) setup(ctx context.Context) error {
	if err := s.streams(ctx); err != nil {
		return err
	}
	if s.ready.Load() {
		// Reconnected: the server may have lost its state; the metadata
		// again, so late subscribers find it.
		s.mu.Lock()
		md := s.nextMetaLocked()
		s.mu.Unlock()
		return s.publishMetaNow(ctx, md)
	}
	var old *streammsg.Metadata
	ms, err := s.js.Stream(ctx, s.subj.MetaStream())
	if err != nil {
		return fmt.Errorf("metadata stream: %w", err)
	}
	raw, err := ms.GetLastMsgForSubject(ctx, s.metaSubject())
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return fmt.Errorf("metadata: %w", err)
	default:
		if old, err = streammsg.UnmarshalMetadata(raw.Data); err != nil {
			s.log.Warn("stream: the repository's metadata is unreadable; starting afresh", "sink", s.name, "err", err)
			old = nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old != nil && !s.loaded {
		// The first start of this process: a previous run that did not
		// close its stream may have lost records without a count.
		s.meta.m.Unclosed = slices.Clone(old.Unclosed)
		if !old.Closed {
			s.meta.m.Unclosed = append(s.meta.m.Unclosed, old.Run)
		}
		if n := len(s.meta.m.Unclosed); n > streammsg.MaxUnclosed {
			s.meta.m.Unclosed = s.meta.m.Unclosed[n-streammsg.MaxUnclosed:]
		}
	}
	s.loaded = true
	if old != nil {
		s.meta.load(old)
		if age := s.cfg.maxAge(); age > 0 {
			s.meta.expire(time.Now().Add(-age - expiryMargin).UnixNano())
		}
	}
	s.meta.m.Run++
	s.meta.dirty = true
	s.maxMsg = int(s.nc.MaxPayload()) - 1024
	if s.maxMsg < 64<<10 {
		s.maxMsg = 1<<20 - 1024
	}
	// The run's first metadata is stored before the sink is ready: a
	// subscriber that starts then finds it.
	if err := s.publishMetaNow(ctx, s.nextMetaLocked()); err != nil {
		s.meta.m.Run--
		return err
	}
	s.ready.Store(true)
	return nil
}

// publishMetaNow publishes md and waits for the server to store it.
func (s *Sink) publishMetaNow(ctx context.Context, md *streammsg.Metadata) error {
	b, err := streammsg.MarshalMetadata(md)
	if err != nil {
		return err
	}
	if _, err := s.js.PublishMsg(ctx, &natsgo.Msg{Subject: s.metaSubject(), Data: b, Header: s.header()}); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	s.pubMeta.Store(md.Version)
	return nil
}

// streams creates (or updates) the data and metadata streams.
func (s *Sink) streams(ctx context.Context) error {
	replicas := s.cfg.Replicas
	if replicas == 0 && s.cfg.Cluster != nil {
		replicas = s.cfg.Cluster.Replicas
	}
	replicas = max(replicas, 1)
	_, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        s.subj.Stream(),
		Description: "tracebridge live stream: records and traces",
		Subjects:    []string{s.subj.AllRecords(), s.subj.AllTraces()},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      s.cfg.maxAge(),
		MaxBytes:    orUnlimited(s.cfg.maxBytes()),
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		AllowDirect: true,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.subj.Stream(), err)
	}
	_, err = s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              s.subj.MetaStream(),
		Description:       "tracebridge live stream: the last metadata",
		Subjects:          []string{s.subj.Meta(), s.subj.AllNodeMeta()}, // a bridge's, a cluster's nodes'
		Retention:         jetstream.LimitsPolicy,
		MaxMsgsPerSubject: 1,
		Storage:           jetstream.FileStorage,
		Replicas:          replicas,
		AllowDirect:       true,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.subj.MetaStream(), err)
	}
	return nil
}

func orUnlimited(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// publishMetaLocked queues the next metadata version (s.mu held).
func (s *Sink) publishMetaLocked() {
	if s.meta.m.Run == 0 {
		return // not set up yet: setup publishes
	}
	md := s.nextMetaLocked()
	b, err := streammsg.MarshalMetadata(md)
	if err != nil {
		s.log.Error("stream: metadata", "sink", s.name, "err", err)
		return
	}
	s.pushCounted(outMsg{subject: s.metaSubject(), data: b, meta: md.Version})
}

// nextMetaLocked makes the next metadata version (s.mu held).
func (s *Sink) nextMetaLocked() *streammsg.Metadata {
	md := s.meta.next(s.ordinal, s.lost.Load())
	s.lastMeta, s.metaAt = md, time.Now()
	return md
}

// Consume encodes b's records and queues them; it never waits for the
// server.
func (s *Sink) Consume(_ context.Context, b *record.Batch) error {
	n := b.Len()
	if n == 0 {
		return nil
	}
	if !s.ready.Load() {
		if !s.durable {
			s.lost.Add(uint64(n))
			return nil
		}
		if err := s.waitReady(); err != nil {
			return err
		}
	}
	now := time.Now().UnixNano()
	s.mu.Lock()
	if !s.durable {
		s.consumeLocked(b, now)
		s.mu.Unlock()
		return nil
	}
	for start := 0; start < n; start += maxChunk {
		s.encode(b.Records[start:min(start+maxChunk, n)], &b.Origin, now)
	}
	s.mu.Unlock()
	// Durable: into the outbox once s.mu is released, waiting for room
	// (the publisher may need s.mu meanwhile).
	for i, m := range s.batch {
		s.queued.Add(1)
		if !s.out.pushWait(m, s.abort) {
			s.settle(1, true)
			left := 0
			for _, r := range s.batch[i:] {
				left += r.records
			}
			s.queued.Add(uint64(len(s.batch) - i - 1))
			s.settle(uint64(len(s.batch)-i-1), true)
			s.lost.Add(uint64(left))
			clear(s.batch)
			s.batch = s.batch[:0]
			return fmt.Errorf("stream: closing with %d records not queued: %w", left, pipeline.ErrClosed)
		}
		s.batch[i] = outMsg{}
	}
	s.batch = s.batch[:0]
	return nil
}

// SetBacklog is how the engine tells the sink what waits in its queue.
func (s *Sink) SetBacklog(queued func() int) { s.backlog = queued }

// consumeLocked publishes b (best-effort; s.mu held). While more batches
// wait in the engine's queue (the stream is behind), the records of
// consecutive batches of one origin are packed into one batch of at most
// maxChunk records, published once the queue is empty, the origin
// changes or it is full: fewer, larger messages while the stream catches
// up; a batch is published at once when none waits (no added latency).
func (s *Sink) consumeLocked(b *record.Batch, now int64) {
	n := b.Len()
	if s.acc.Len() > 0 && (s.acc.Origin != b.Origin || s.acc.Len()+n > maxChunk) {
		s.flushPackedLocked(now)
	}
	if s.backlog != nil && n < maxChunk && (s.acc.Len() > 0 || s.backlog() > 0) {
		if s.acc.Len() == 0 {
			s.acc.Origin = b.Origin
		} else {
			s.packed.Add(1)
		}
		for i := range b.Records {
			s.acc.AddRecord(&b.Records[i])
		}
		if s.backlog() == 0 || s.acc.Len() >= maxChunk {
			s.flushPackedLocked(now)
		}
		return
	}
	for start := 0; start < n; start += maxChunk {
		s.encode(b.Records[start:min(start+maxChunk, n)], &b.Origin, now)
	}
	s.pushLocked()
}

// flushPackedLocked publishes the packed batch (s.mu held).
func (s *Sink) flushPackedLocked(now int64) {
	if s.acc.Len() == 0 {
		return
	}
	s.encode(s.acc.Records, &s.acc.Origin, now)
	s.pushLocked()
	s.acc.Reset()
}

// pushLocked puts what encode made into the outbox without waiting
// (best-effort; s.mu held, so messages enter it in the order of their
// subject ordinals).
func (s *Sink) pushLocked() {
	for i, m := range s.batch {
		if !s.pushCounted(m) {
			n := s.lost.Add(uint64(m.records))
			s.warn.Log(context.Background(), s.log, slog.LevelWarn, "stream: publishing is behind (server slow or unreachable) and the buffer is full; records dropped",
				"sink", s.name, "records", m.records, "lost_total", n)
		}
		s.batch[i] = outMsg{}
	}
	s.batch = s.batch[:0]
}

// pushCounted queues m without waiting, counting it for Flush.
func (s *Sink) pushCounted(m outMsg) bool {
	s.queued.Add(1)
	if !s.out.push(m) {
		s.settle(1, false)
		return false
	}
	return true
}

// settle counts n queued messages as done (failed: not stored).
func (s *Sink) settle(n uint64, failed bool) {
	if failed {
		s.failed.Add(n)
	}
	s.settled.Add(n)
	select {
	case s.progress <- struct{}{}:
	default:
	}
}

// waitReady waits until the streams exist (a durable stream before its
// server is reachable).
func (s *Sink) waitReady() error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !s.ready.Load() {
		select {
		case <-t.C:
		case <-s.abort:
			return fmt.Errorf("stream: closing before the NATS server was reachable: %w", pipeline.ErrClosed)
		case <-s.quit:
			return fmt.Errorf("stream: closed: %w", pipeline.ErrClosed)
		}
	}
	return nil
}

// Abort makes a Consume or Flush waiting for the server (a durable
// stream) return.
func (s *Sink) Abort() { s.abortOnce.Do(func() { close(s.abort) }) }

// acker waits for the acknowledgements of the publishes in order (one
// stream: the server acknowledges in order) and settles them.
func (s *Sink) acker() {
	for a := range s.acks {
		select {
		case <-a.f.Ok():
			s.settle(1, false)
		case <-a.f.Err():
			s.settle(1, true)
		case <-s.abort:
			s.settle(1, true)
		}
	}
}

// encode publishes recs as one batch: a message per (type, host), in
// the order of their first records. s.mu is held.
func (s *Sink) encode(recs []record.Record, origin *record.Origin, now int64) {
	m := s.meta
	m.receiver(origin.Receiver)
	parts := s.parts[:0]
	last := -1
	for i := range recs {
		r := &recs[i]
		ts := m.typeOf(r.Type, now)
		host := origin.Host
		if host == "" && ts.host >= 0 && ts.host < len(r.Values) {
			host = r.Values[ts.host].Str()
		}
		k := -1
		if last >= 0 && parts[last].ts == ts && parts[last].host == host {
			k = last
		} else {
			for j := range parts {
				if parts[j].ts == ts && parts[j].host == host {
					k = j
					break
				}
			}
		}
		if k < 0 {
			k = len(parts)
			if cap(parts) > k {
				parts = parts[:k+1]
				parts[k].ts, parts[k].host, parts[k].pos, parts[k].data, parts[k].sj = ts, host, parts[k].pos[:0], nil, nil
			} else {
				parts = append(parts, part{ts: ts, host: host})
			}
			m.host(host, origin.Receiver, now)
			m.seenType(ts, now)
		}
		parts[k].pos = append(parts[k].pos, uint32(i))
		last = k
	}
	s.parts = parts
	if m.dirty {
		s.publishMetaLocked()
	}
	refs := s.refs[:0]
	for _, p := range parts {
		refs = append(refs, streammsg.PartRef{TypeID: p.ts.id, Host: p.host})
	}
	s.refs = refs
	lost := s.lost.Load()
	for k := range parts {
		p := &parts[k]
		sj := s.subjectOf(p.ts, p.host)
		p.sj = sj
		o := *origin
		o.Host = p.host
		h := streammsg.Header{
			Run: m.m.Run, Meta: m.m.Version, Time: now, Ordinal: s.ordinal, BatchRecords: uint32(len(recs)),
			Index: uint32(k), Parts: refs, SubjectOrdinal: sj.ord, Lost: lost, Origin: o, Count: len(p.pos),
		}
		if len(parts) > 1 {
			h.Positions = p.pos
		}
		var data []byte
		if s.json {
			data = s.enc.AppendJSON(make([]byte, 0, 256*len(p.pos)), &h, recs)
		} else {
			data = s.enc.AppendBinary(make([]byte, 0, 48*len(p.pos)+128), &h, recs)
		}
		if len(data) > s.maxMsg {
			s.split(recs, origin, now)
			return
		}
		p.data = data
	}
	for k := range parts {
		p := &parts[k]
		p.sj.ord += uint64(len(p.pos))
		s.batch = append(s.batch, outMsg{subject: p.sj.subject, data: p.data, records: len(p.pos)})
		p.data = nil
	}
	s.ordinal += uint64(len(recs))
}

// Dropped counts the records of a batch the engine dropped because the
// sink was behind: their subjects' counts move on, so subscribers see the
// gap, and the metadata's lost count grows.
func (s *Sink) Dropped(b *record.Batch) {
	n := b.Len()
	if n == 0 {
		return
	}
	s.lost.Add(uint64(n))
	if !s.ready.Load() {
		return
	}
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	// What was consumed before the dropped batch goes out first, so the
	// gap shows where the records were missed.
	s.flushPackedLocked(now)
	for i := range b.Records {
		r := &b.Records[i]
		ts := s.meta.typeOf(r.Type, now)
		host := b.Origin.Host
		if host == "" && ts.host >= 0 && ts.host < len(r.Values) {
			host = r.Values[ts.host].Str()
		}
		s.subjectOf(ts, host).ord++
	}
	s.warn.Log(context.Background(), s.log, slog.LevelWarn, "stream: the sink is behind; the engine dropped a batch (subscribers are told)",
		"sink", s.name, "records", n, "lost_total", s.lost.Load())
}

// subjectOf returns the subject state of (ts, host) (s.mu held).
func (s *Sink) subjectOf(ts *typeState, host string) *subjState {
	key := subjKey{ts.id, host}
	sj := s.subjects[key]
	if sj == nil {
		sj = &subjState{subject: s.recordsSubject(host, ts.token)}
		s.subjects[key] = sj
	}
	return sj
}

// split publishes recs in two halves (a message was too large); a record
// too large for a message of its own is dropped and counted.
func (s *Sink) split(recs []record.Record, origin *record.Origin, now int64) {
	if len(recs) == 1 {
		n := s.lost.Add(1)
		s.ordinal++
		s.warn.Log(context.Background(), s.log, slog.LevelWarn, "stream: a record is larger than the server's largest message; dropped",
			"sink", s.name, "type", recs[0].Type.Name, "lost_total", n)
		return
	}
	half := len(recs) / 2
	s.encode(recs[:half], origin, now)
	s.encode(recs[half:], origin, now)
}

func (s *Sink) recordsSubject(host, token string) string {
	return s.subjPrefix() + ".records." + streammsg.HostToken(host) + "." + token
}

// TraceSources: every trace when traces are on, else none. A cluster
// node's engine assembles none for the stream: the node's owners hand it
// the traces of their partitions, whole (serve), through ConsumeTraces.
func (s *Sink) TraceSources() trace.Sources {
	if !s.cfg.Traces || s.cfg.Cluster != nil {
		return 0
	}
	return trace.AllSources
}

// ConsumeTraces publishes each trace (trace.AppendJSON) on
// PREFIX.traces.<host of its root span>. It is safe for concurrent use
// (a cluster node's owners call it from their goroutines).
func (s *Sink) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	if !s.ready.Load() {
		return nil
	}
	select {
	case <-s.quit:
		return nil // closed: a cluster node's owners hand on their last traces after the engine's sinks
	default:
	}
	for _, t := range ts {
		host := ""
		if r := t.Root(); r != nil {
			host = r.Host
		} else if hs := t.Hosts(); len(hs) > 0 {
			host = hs[0]
		}
		if !s.pushCounted(outMsg{subject: s.subj.Traces(host), data: trace.AppendJSON(nil, t)}) {
			s.warn.Log(context.Background(), s.log, slog.LevelWarn, "stream: publishing is behind; a trace was dropped", "sink", s.name)
		}
	}
	return nil
}

// Flush refreshes the metadata now and then (last-seen times, types and
// hosts whose records retention removed). Publishing itself never waits
// for it: the stream is best-effort.
func (s *Sink) Flush() error {
	if !s.ready.Load() {
		return nil
	}
	now := time.Now()
	s.mu.Lock()
	s.flushPackedLocked(now.UnixNano()) // the queue held a marker or traces last
	if age := s.cfg.maxAge(); age > 0 && now.After(s.expireAt) {
		s.expireAt = now.Add(time.Minute)
		s.meta.expire(now.Add(-age - expiryMargin).UnixNano())
	}
	if s.meta.dirty || s.meta.seen && now.Sub(s.metaAt) >= metaRefresh {
		s.publishMetaLocked()
	}
	s.mu.Unlock()
	if s.durable {
		return s.waitSettled()
	}
	return nil
}

// waitSettled waits until the server acknowledged every message queued
// before the call (a durable stream's Flush: brokers acknowledge after
// it), and reports messages it did not store since the last call.
func (s *Sink) waitSettled() error {
	target := s.queued.Load()
	for s.settled.Load() < target {
		select {
		case <-s.progress:
		case <-s.abort:
			return fmt.Errorf("stream: closing with %d messages not acknowledged: %w", target-s.settled.Load(), pipeline.ErrClosed)
		}
	}
	if f := s.failed.Load(); f != s.flushFailed {
		n := f - s.flushFailed
		s.flushFailed = f
		return fmt.Errorf("stream: %d messages were not stored by the server (the records are missing from the stream)", n)
	}
	return nil
}

func (s *Sink) wakeUp() {
	select {
	case s.out.wake <- struct{}{}:
	default:
	}
}

// publisher hands the outbox to JetStream in order until Close.
func (s *Sink) publisher() {
	defer close(s.done)
	defer close(s.acks)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var batch []outMsg
	for {
		quitting := false
		select {
		case <-s.quit:
			quitting = true
		case <-s.out.wake:
		case <-tick.C:
		}
		if !s.nc.IsConnected() || !s.ready.Load() || s.reconnect.Load() {
			if quitting || !s.nc.IsConnected() {
				if quitting {
					return
				}
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
			s.reconnect.Store(false)
			err := s.setup(ctx)
			cancel()
			if err != nil {
				s.reconnect.Store(true)
				s.warn.Log(context.Background(), s.log, slog.LevelWarn, "stream: setting up the streams failed; retrying", "sink", s.name, "err", err)
				continue
			}
		}
		batch = s.out.take(batch[:0])
		for i, m := range batch {
			if !s.nc.IsConnected() {
				s.out.unshift(batch[i:])
				break
			}
			if m.meta > 0 && m.meta <= s.pubMeta.Load() {
				s.settle(1, false)
				continue // a newer version went out already (setup after a reconnect)
			}
			f, err := s.js.PublishMsgAsync(&natsgo.Msg{Subject: m.subject, Data: m.data, Header: s.header()}, jetstream.WithStallWait(5*time.Second))
			if err != nil {
				if m.meta > 0 || errors.Is(err, natsgo.ErrConnectionClosed) && !quitting {
					s.out.unshift(batch[i:])
					break
				}
				if s.durable && !quitting {
					// Durable: nothing is dropped; again once the
					// server takes publishes.
					s.out.unshift(batch[i:])
					break
				}
				n := s.lost.Add(uint64(m.records))
				s.settle(1, true)
				s.warn.Log(context.Background(), s.log, slog.LevelWarn, "stream: publish failed; records dropped", "sink", s.name, "err", err, "lost_total", n)
				continue
			}
			s.acks <- ackWait{f: f}
			if m.meta > 0 {
				s.pubMeta.Store(m.meta)
			}
			s.published.Add(uint64(m.records))
		}
		clear(batch)
		if quitting {
			return
		}
	}
}

// Close publishes what is queued (for a moment at most), stops the
// publisher and the control handler, and releases the server.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() {
		if s.ctlSub != nil {
			s.ctlSub.Unsubscribe()
		}
		s.mu.Lock()
		s.flushPackedLocked(time.Now().UnixNano())
		if s.ready.Load() && s.nc.IsConnected() {
			// The final counts; stored only once every message queued
			// before it is, and so the next run knows this one closed.
			s.meta.m.Closed = true
			s.publishMetaLocked()
		}
		s.mu.Unlock()
		s.out.close()
		close(s.quit)
		select {
		case <-s.done:
		case <-time.After(2 * time.Second):
		}
		select {
		case <-s.js.PublishAsyncComplete():
		case <-time.After(time.Second):
		}
		if n, _ := s.out.len(); n > 0 || s.lost.Load() > 0 {
			s.log.Warn("stream: closed with records not published", "sink", s.name, "queued_messages", n, "lost_records", s.lost.Load())
		}
		s.closeConn()
		s.Abort() // the acker settles what was never acknowledged
	})
	return s.closeErr
}

func (s *Sink) closeConn() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// Stats says what the sink published and lost in this run.
type Stats struct {
	Published, Lost, Unacknowledged uint64
	// Packed counts batches published in one with the batches before
	// them (the stream was behind).
	Packed uint64
}

// Stats returns the counts so far.
func (s *Sink) Stats() Stats {
	return Stats{Published: s.published.Load(), Lost: s.lost.Load(), Unacknowledged: s.unacked.Load(), Packed: s.packed.Load()}
}

// onControl announces new control settings in the metadata.
func (s *Sink) onControl(old, now streammsg.ControlState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meta.control(old, now)
	s.publishMetaLocked()
}

// handleControl answers a control request (on a nats.go goroutine).
func (s *Sink) handleControl(m *natsgo.Msg) {
	reply := func(r streammsg.ControlReply) {
		if m.Reply == "" {
			return
		}
		b, _ := json.Marshal(r)
		m.Respond(b)
	}
	var req streammsg.ControlRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		reply(streammsg.ControlReply{Error: "malformed control request: " + err.Error()})
		return
	}
	if s.ctl == nil {
		reply(streammsg.ControlReply{Error: "remote control is off on this bridge (the stream is not the top-level stream of serve)"})
		return
	}
	if req.Op != streammsg.OpStatus {
		if err := s.authorize(m); err != nil {
			if errors.Is(err, errElsewhere) {
				return // another node's client: that node answers
			}
			s.warn.Log(context.Background(), s.log, slog.LevelWarn, "stream: control request refused", "sink", s.name, "op", req.Op, "err", err)
			reply(streammsg.ControlReply{Error: err.Error()})
			return
		}
	}
	msg, err := s.ctl.Apply(req)
	if err != nil {
		reply(streammsg.ControlReply{Error: err.Error()})
		return
	}
	if req.Op != streammsg.OpStatus {
		s.log.Info("stream: control", "sink", s.name, "op", req.Op, "type", req.Type, "host", req.Host, "result", msg)
	}
	st := s.ctl.State()
	reply(streammsg.ControlReply{OK: true, Message: msg, Control: &st})
}

// ErrUnauthorized is wrapped by refused control requests.
var ErrUnauthorized = errors.New("control refused")

// errElsewhere: a control request of a client of another cluster node's
// server, which that node's stream decides on.
var errElsewhere = errors.New("control request of another node's client")

// authorize checks who sends a control request: with a token file the
// token must match; without one, the requester must be a loopback (or
// in-process) client of the embedded server.
func (s *Sink) authorize(m *natsgo.Msg) error {
	if s.token != nil {
		if subtle.ConstantTimeCompare([]byte(m.Header.Get(streammsg.TokenHeader)), s.token) != 1 {
			return fmt.Errorf("%w: the bridge wants a control token (control --token-file FILE) and this one is missing or wrong", ErrUnauthorized)
		}
		return nil
	}
	if s.srv == nil {
		return fmt.Errorf("%w: over an external NATS server the bridge takes control only with a token (stream: {control_token_file: FILE})", ErrUnauthorized)
	}
	if m.Reply == "" {
		return fmt.Errorf("%w: a request without a reply subject", ErrUnauthorized)
	}
	ips, err := s.srv.SubscriberIPs(m.Reply)
	if err == nil && len(ips) == 0 && s.cfg.Cluster != nil {
		// In a cluster every node's stream hears the request; only the
		// node whose server the requester is a client of can tell where
		// it is, and answers.
		return errElsewhere
	}
	if err != nil || len(ips) == 0 {
		return fmt.Errorf("%w: cannot tell where the request comes from", ErrUnauthorized)
	}
	return loopbackOnly(ips)
}

// loopbackOnly accepts requesters on loopback addresses or in-process
// (""), the clients that may control a bridge without a token.
func loopbackOnly(ips []string) error {
	for _, ip := range ips {
		if ip == "" {
			continue // in-process
		}
		if a := net.ParseIP(ip); a == nil || !a.IsLoopback() {
			return fmt.Errorf("%w: control from %s: without control_token_file the bridge takes control from loopback only", ErrUnauthorized, ip)
		}
	}
	return nil
}
