package stream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/natslogin"
	"github.com/tracebridge/tracebridge/internal/record"
)

// The record model and the metadata (aliases of tracebridge's types).
type (
	// Record is one monitoring record: its type, logging timestamp and
	// one value per field.
	Record = record.Record
	// Type is a record type: a class name and typed fields.
	Type = record.Type
	// Field is one field of a type.
	Field = record.Field
	// Value is one field value (Int, Bool, Float, Double, Str, List by
	// kind).
	Value = record.Value
	// Origin says where a batch came from: receiver, peer, host,
	// service, session.
	Origin = record.Origin
	// Metadata describes the repository: record types (names, fields,
	// kinds), hosts, receivers, control settings, and what changed.
	Metadata = streammsg.Metadata
	// TypeInfo, HostInfo and ControlState are parts of Metadata.
	TypeInfo     = streammsg.TypeInfo
	HostInfo     = streammsg.HostInfo
	ReceiverInfo = streammsg.ReceiverInfo
	ControlState = streammsg.ControlState
)

// Event is one record from the stream.
type Event struct {
	Record
	// Host is the monitored host ("" when the bridge does not know it).
	Host string
	// Origin is where the bridge got the record.
	Origin Origin
	// Time is when the bridge published the record's batch.
	Time time.Time
	// Seq is the repository sequence of the record's message (a start
	// point for SetStartSequence and `tail --from-seq`).
	Seq uint64
	// Run and Ordinal: the bridge's run on the repository and the
	// record's number within it.
	Run, Ordinal uint64
	// Node is the cluster node that received the record ("" from a
	// bridge that runs alone); Run and Ordinal are that node's.
	Node string
}

// Gap says that records of one type and host were not read: retention
// removed them before the subscriber got to them, or the bridge could
// not publish them (its NATS server was unreachable longer than its
// buffer lasted).
type Gap struct {
	Type, Host string
	// Node is the cluster node whose records were missed ("" a bridge
	// that runs alone).
	Node string
	// Records missed.
	Records uint64
	// BridgeLost counts the records, of any type, the bridge itself
	// dropped over the same span.
	BridgeLost uint64
	// UnclosedRun, when not 0, says instead that the bridge's run of that
	// number ended without closing its stream (it was killed, or could
	// not publish everything when it stopped): records it had taken but
	// not published may be missing from the end of that run, of any type
	// and host. How many cannot be known: the run counted them only in
	// its own memory (docs/STREAM.md, "A bridge killed"), so Records is 0
	// for unknown, not none (Type and Host are empty).
	UnclosedRun uint64
}

// GapError is the error OnError gets for a gap when no OnGap handler is
// registered.
type GapError struct{ Gap Gap }

func (e *GapError) Error() string {
	bridge := "the bridge"
	if e.Gap.Node != "" {
		bridge = "node " + e.Gap.Node
	}
	if r := e.Gap.UnclosedRun; r != 0 {
		return fmt.Sprintf("%s's run %d ended without closing its stream (killed?): records it had taken but not yet published may be missing; how many cannot be known (it was counted only in the killed process)", bridge, r)
	}
	host := e.Gap.Host
	if host == "" {
		host = "an unknown host"
	}
	why := "the repository's retention removed them before they were read"
	if e.Gap.BridgeLost > 0 {
		why = fmt.Sprintf("%s could not publish %d records in that span; retention may have removed the rest", bridge, e.Gap.BridgeLost)
	}
	return fmt.Sprintf("missed %d records of %s from %s: %s", e.Gap.Records, e.Gap.Type, host, why)
}

// Trace is an assembled trace from the stream (JSON in the shape of
// `tracebridge query --json`).
type Trace struct {
	Host string
	// Node is the cluster node that published it ("" a bridge that runs
	// alone).
	Node string
	JSON []byte
	Time time.Time
	Seq  uint64
}

// Options configure a Stream.
type Options struct {
	// User and Password authenticate with the NATS server (or put them
	// in the URL).
	User, Password string
	// CredsFile, when User and the URL name no user, holds USER:PASSWORD
	// (a copy of a bridge's DATA_DIR/nats/credentials, for a client on
	// another machine).
	CredsFile string
	// DataDir, when nothing above names a user and the server is on
	// loopback, is the data directory of the bridge whose credential is
	// presented (CredentialsFile; none there: no credential). Commands
	// pass DefaultDataDir unless told otherwise.
	DataDir string
	// Token (a NATS authentication token) or NATSCreds (a NATS
	// credentials file: a user JWT and its NKey seed, for decentralized
	// authentication) log in to a NATS server that wants them, such as
	// the existing NATS cluster of tracebridge cluster nodes (their
	// nats_token, nats_creds). With either, no USER:PASSWORD is looked
	// up (User, the URL's user, CredsFile and DataDir are not used).
	Token, NATSCreds string
	// TLS, when set, is the client's TLS configuration for the server
	// (the CA it trusts, a client certificate): a tls:// URL without it
	// trusts the system's roots.
	TLS *tls.Config
	// Prefix is the bridge's subject prefix (default tracebridge).
	Prefix string
	// Name names the connection on the server.
	Name string
}

// ErrNoStream is returned when the server holds no tracebridge stream.
var ErrNoStream = errors.New("no tracebridge stream")

// Stream follows a bridge's live stream. Register handlers and set the
// start and end before Start; a Stream is started once.
type Stream struct {
	url  string
	subj streammsg.Subjects
	nc   *natsgo.Conn
	js   jetstream.JetStream

	typeHandlers map[string][]func(*Event) // by full or short name; "" every type
	metaHandlers []func(*Metadata)
	flushHandlers,
	closeHandlers []func()
	errHandlers   []func(error)
	gapHandlers   []func(Gap)
	traceHandlers []func(*Trace)
	hosts         map[string]bool

	startTime time.Time
	startSeq  uint64
	endTime   time.Time
	caughtUp  bool // end once everything stored at start has been read
	shared    bool // the connection is another stream's

	inHandler atomic.Bool // Start's goroutine is in a handler

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
	closed  bool
}

// Open connects to the NATS server at url (nats://HOST:PORT, tls://…;
// the servers of one NATS cluster comma-separated).
func Open(url string, o Options) (*Stream, error) {
	s := &Stream{subj: streammsg.Subjects{Prefix: o.Prefix}, typeHandlers: map[string][]func(*Event){}}
	target, user, pass, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if o.Token != "" && o.NATSCreds != "" {
		return nil, fmt.Errorf("stream %s: give a token or a NATS credentials file, not both", target)
	}
	if o.Token == "" && o.NATSCreds == "" {
		user, pass, err = o.credentials(hostOf(target), user, pass)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", target, err)
		}
	} else {
		user, pass = "", ""
	}
	s.url = target
	name := o.Name
	if name == "" {
		name = "tracebridge stream client"
	}
	opts := []natsgo.Option{natsgo.Name(name), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(250 * time.Millisecond)}
	if o.NATSCreds != "" {
		if _, err := os.Stat(o.NATSCreds); err != nil {
			return nil, fmt.Errorf("stream %s: NATS credentials: %w", target, err)
		}
	}
	opts = append(opts, natslogin.Login{User: user, Password: pass, Token: o.Token, CredsFile: o.NATSCreds, TLS: o.TLS}.Options()...)
	nc, err := natsgo.Connect(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", target, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("stream %s: %w", target, err)
	}
	s.nc, s.js = nc, js
	return s, nil
}

// fork returns a new stream on s's connection (Close on it leaves the
// connection open).
func (s *Stream) fork() *Stream {
	return &Stream{url: s.url, subj: s.subj, nc: s.nc, js: s.js, typeHandlers: map[string][]func(*Event){}, shared: true}
}

// parseURL parses a server's URL, or several comma-separated (the
// servers of one NATS cluster), into the target Open connects to
// (without credentials) and the user and password the first URL names.
func parseURL(raw string) (target, user, pass string, err error) {
	var targets []string
	for i, one := range strings.Split(raw, ",") {
		if !strings.Contains(one, "://") {
			return "", "", "", fmt.Errorf("stream URL %q: want nats://HOST:PORT", raw)
		}
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Hostname() == "" {
			return "", "", "", fmt.Errorf("stream URL %q: want nats://HOST:PORT or tls://HOST:PORT", raw)
		}
		if u.User != nil {
			if i == 0 {
				user = u.User.Username()
				pass, _ = u.User.Password()
			}
			u.User = nil
		}
		if u.Port() == "" {
			u.Host += ":4222"
		}
		targets = append(targets, u.String())
	}
	return strings.Join(targets, ","), user, pass, nil
}

// URL is the server's URL (without credentials).
func (s *Stream) URL() string { return s.url }

// OnEvent registers fn for the records of a type: a full class name
// (kieker.common.record.flow.trace.operation.BeforeOperationEvent), a
// short one (BeforeOperationEvent: every type of that name), or "" for
// every type.
func (s *Stream) OnEvent(typ string, fn func(*Event)) {
	s.typeHandlers[typ] = append(s.typeHandlers[typ], fn)
}

// OnMetadata registers fn, called with the repository's metadata before
// the first event and whenever it changes.
func (s *Stream) OnMetadata(fn func(*Metadata)) { s.metaHandlers = append(s.metaHandlers, fn) }

// OnFlush registers fn, called when the stream has handed on everything
// the repository held at that moment (it is caught up).
func (s *Stream) OnFlush(fn func()) { s.flushHandlers = append(s.flushHandlers, fn) }

// OnError registers fn for errors that do not end the stream (an
// undecodable message, a gap without an OnGap handler).
func (s *Stream) OnError(fn func(error)) { s.errHandlers = append(s.errHandlers, fn) }

// OnGap registers fn, told about records missed.
func (s *Stream) OnGap(fn func(Gap)) { s.gapHandlers = append(s.gapHandlers, fn) }

// OnTrace registers fn for assembled traces (when the bridge publishes
// them).
func (s *Stream) OnTrace(fn func(*Trace)) { s.traceHandlers = append(s.traceHandlers, fn) }

// OnClose registers fn, called once when the stream ends.
func (s *Stream) OnClose(fn func()) { s.closeHandlers = append(s.closeHandlers, fn) }

// SetHosts limits the stream to the records of these hosts.
func (s *Stream) SetHosts(hosts ...string) {
	s.hosts = nil
	for _, h := range hosts {
		if s.hosts == nil {
			s.hosts = map[string]bool{}
		}
		s.hosts[h] = true
	}
}

// SetStartTime starts the stream at the records published at or after t
// (the repository's past, then live). Without it (or a start sequence)
// the stream starts with what is published after Start.
func (s *Stream) SetStartTime(t time.Time) { s.startTime, s.startSeq = t, 0 }

// SetStartSequence starts the stream at repository sequence seq.
func (s *Stream) SetStartSequence(seq uint64) { s.startSeq, s.startTime = seq, time.Time{} }

// SetEndTime ends the stream at the first record published after t, or,
// when none comes, once t has passed and the stream has read everything
// the repository holds of its hosts and types (none: it ends then): a
// window in the past (since 24h, until now) is read whole however long
// that takes, the records Dump writes of it.
func (s *Stream) SetEndTime(t time.Time) { s.endTime = t }

// Metadata returns the repository's current metadata. A cluster's
// repository has one per node (Metadata.Node); Metadata returns them
// merged (MergeMetadata): every node's types, hosts and receivers.
func (s *Stream) Metadata(ctx context.Context) (*Metadata, error) {
	mds, _, err := s.allMetadata(ctx)
	if err != nil {
		return nil, err
	}
	return MergeMetadata(mds), nil
}

// allMetadata returns the last metadata of every writer of the
// repository — the bridge's (PREFIX.meta), or each cluster node's
// (PREFIX.meta.<node>) — and the highest of their sequences.
func (s *Stream) allMetadata(ctx context.Context) ([]*Metadata, uint64, error) {
	ms, err := s.js.Stream(ctx, s.subj.MetaStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, 0, fmt.Errorf("%w at %s: JetStream stream %s not found (is the bridge's stream on? its subject prefix?)", ErrNoStream, s.url, s.subj.MetaStream())
	}
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", s.url, err)
	}
	subjects := []string{s.subj.Meta()}
	info, err := ms.Info(ctx, jetstream.WithSubjectFilter(s.subj.AllNodeMeta()))
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", s.url, err)
	}
	nodes := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		nodes = append(nodes, subj)
	}
	slices.Sort(nodes)
	subjects = append(subjects, nodes...)
	var out []*Metadata
	var last uint64
	for _, subj := range subjects {
		md, seq, err := s.lastMetadataOn(ctx, ms, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		out = append(out, md)
		last = max(last, seq)
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("%w at %s: no metadata yet on %s", ErrNoStream, s.url, s.subj.Meta())
	}
	return out, last, nil
}

// lastMetadata returns the last metadata of one writer ("" the bridge,
// else a cluster node) and its sequence.
func (s *Stream) lastMetadata(ctx context.Context, node string) (*Metadata, uint64, error) {
	ms, err := s.js.Stream(ctx, s.subj.MetaStream())
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", s.url, err)
	}
	subj := s.subj.Meta()
	if node != "" {
		subj = s.subj.NodeMeta(node)
	}
	return s.lastMetadataOn(ctx, ms, subj)
}

// lastMetadataOn reads the last message of a metadata subject
// (jetstream.ErrMsgNotFound when there is none).
func (s *Stream) lastMetadataOn(ctx context.Context, ms jetstream.Stream, subj string) (*Metadata, uint64, error) {
	raw, err := ms.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: metadata: %w", s.url, err)
	}
	md, err := streammsg.UnmarshalMetadata(raw.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: metadata on %s: %w", s.url, subj, err)
	}
	return md, raw.Sequence, nil
}

// MergeMetadata joins the metadata of a cluster's nodes into one view:
// every type (by name; the id is the first node's, ids are each node's
// own), host (receivers joined, first and last seen over all) and
// receiver (by name and where) of any node, control settings and
// retention of the first, records and lost summed, Version the sum of
// the versions (it grows whenever a node's does), Node empty and Nodes
// the nodes. One metadata is returned as it is.
func MergeMetadata(mds []*Metadata) *Metadata {
	switch len(mds) {
	case 0:
		return nil
	case 1:
		return mds[0]
	}
	m := *mds[0]
	m.Node, m.Version, m.Records, m.Lost, m.Time = "", 0, 0, 0, 0
	m.Types, m.Hosts, m.Receivers, m.Nodes = nil, nil, nil, nil
	m.Added, m.Removed = streammsg.Change{}, streammsg.Change{}
	types, hosts, recvs := map[string]bool{}, map[string]int{}, map[ReceiverInfo]bool{}
	for _, md := range mds {
		m.Nodes = append(m.Nodes, md.Node)
		m.Version += md.Version
		m.Records += md.Records
		m.Lost += md.Lost
		m.Time = max(m.Time, md.Time)
		for _, t := range md.Types {
			if !types[t.Name] {
				types[t.Name] = true
				m.Types = append(m.Types, t)
			}
		}
		for _, h := range md.Hosts {
			i, ok := hosts[h.Name]
			if !ok {
				hosts[h.Name] = len(m.Hosts)
				h.Receivers = slices.Clone(h.Receivers)
				m.Hosts = append(m.Hosts, h)
				continue
			}
			mh := &m.Hosts[i]
			for _, r := range h.Receivers {
				if !slices.Contains(mh.Receivers, r) {
					mh.Receivers = append(mh.Receivers, r)
				}
			}
			mh.FirstSeen, mh.LastSeen = min(mh.FirstSeen, h.FirstSeen), max(mh.LastSeen, h.LastSeen)
		}
		for _, r := range md.Receivers {
			if !recvs[r] {
				recvs[r] = true
				m.Receivers = append(m.Receivers, r)
			}
		}
	}
	return &m
}

// Start runs the stream until ctx ends, Close is called, or the end time
// (SetEndTime) is passed; it returns nil then. Handlers run on Start's
// goroutine.
func (s *Stream) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		return errors.New("stream: started twice, or closed")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	s.mu.Unlock()
	defer close(s.done)
	defer s.cancel()
	d := newDispatcher(s)
	err := d.run(ctx)
	for _, fn := range s.closeHandlers {
		fn()
	}
	return err
}

// StartAsync starts the stream on a goroutine of its own; errors go to
// OnError.
func (s *Stream) StartAsync(ctx context.Context) {
	go func() {
		if err := s.Start(ctx); err != nil {
			for _, fn := range s.errHandlers {
				fn(err)
			}
		}
	}()
}

// Close ends the stream (Start returns) and the connection. It is safe to
// call twice and without Start.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		if !s.inHandler.Load() { // Close from a handler must not wait for itself
			<-done
		}
	}
	if !s.shared {
		s.nc.Close()
	}
	return nil
}
