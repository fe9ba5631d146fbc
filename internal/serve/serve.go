// Package serve builds a running bridge from a configuration: it loads the
// record types, builds every receiver, stage and sink the configuration
// names through the component factories, serves the metrics endpoint, and
// runs the engine. It is what `tracebridge serve` runs; the engine itself
// (internal/engine) knows none of the concrete components.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	livestream "github.com/tracebridge/tracebridge/stream"

	"github.com/tracebridge/tracebridge/internal/cluster"
	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/engine"
	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/memlimit"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/sink/forward"
	"github.com/tracebridge/tracebridge/internal/sink/kiekerlog"
	storesink "github.com/tracebridge/tracebridge/internal/sink/store"
	streamsink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/internal/source/jfr"
	"github.com/tracebridge/tracebridge/internal/source/jfrhttp"
	"github.com/tracebridge/tracebridge/internal/source/mqtt"
	"github.com/tracebridge/tracebridge/internal/source/nats"
	"github.com/tracebridge/tracebridge/internal/source/otlp"
	"github.com/tracebridge/tracebridge/internal/source/stomp"
	"github.com/tracebridge/tracebridge/internal/source/tcp"
	"github.com/tracebridge/tracebridge/internal/source/zico"
	"github.com/tracebridge/tracebridge/internal/stage/control"
	"github.com/tracebridge/tracebridge/internal/stage/profile"
	"github.com/tracebridge/tracebridge/internal/stage/split"
	"github.com/tracebridge/tracebridge/internal/stage/throttle"
	"github.com/tracebridge/tracebridge/internal/stage/timeunit"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Error classes, matching the Kieker Data Bridge's exit codes: a mapping
// file (1), the configuration (2), communication (3).
var (
	ErrMapping = pipeline.ErrMapping
	ErrConfig  = pipeline.ErrConfig
	ErrComm    = pipeline.ErrComm
)

// AddrInUseError is a listener whose address another program holds
// (EADDRINUSE), for messages that say how to move it: Kind is
// "receiver", "sink", "http", "metrics" or "stream"; Name and Type are a
// receiver's or sink's. Err is the error as it was (its class is kept).
type AddrInUseError struct {
	Kind, Name, Type string
	Err              error
}

func (e *AddrInUseError) Error() string { return e.Err.Error() }
func (e *AddrInUseError) Unwrap() error { return e.Err }

// inUse returns err as an *AddrInUseError when it is a taken address.
func inUse(kind, name, typ string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return &AddrInUseError{Kind: kind, Name: name, Type: typ, Err: err}
	}
	return err
}

// DefaultFactories is every component type `tracebridge serve` can build.
// Adding a component type is one package plus one line here.
func DefaultFactories() *pipeline.Factories {
	f := &pipeline.Factories{}
	f.Receivers = append(f.Receivers, tcp.Factories()...)
	f.Receivers = append(f.Receivers, stomp.Factory(), mqtt.Factory())
	f.Receivers = append(f.Receivers, nats.Factories()...)
	f.Receivers = append(f.Receivers, zico.Factory(), jfr.Factory(), jfrhttp.Factory())
	f.Receivers = append(f.Receivers, otlp.Factories()...)
	f.Stages = append(f.Stages, split.Factory(), timeunit.Factory(), throttle.Factory(), profile.Factory())
	f.Sinks = append(f.Sinks, kiekerlog.Factory(), forward.Factory(), storesink.Factory(), streamsink.Factory())
	return f
}

// Settings are what the caller injects.
type Settings struct {
	Logger *slog.Logger
	// Listener and ListenerInterval report progress (see engine.Settings).
	Listener         engine.Listener
	ListenerInterval int64
	// ShutdownHint tells how to stop at once when shutdown waits for a
	// sink (engine.Settings.ShutdownHint).
	ShutdownHint string
	// Factories builds the components (nil: DefaultFactories).
	Factories *pipeline.Factories
	// UI is the web UI, served at / by the HTTP listener (nil: a short
	// index of the API); Version is what the API reports.
	UI      http.Handler
	Version string
	// MemoryTarget is the memory target when the configuration sets
	// neither memory_limit nor memory_target, nor cluster (a node's heap
	// holds its embedded NATS server too): `tracebridge serve` passes
	// memlimit.DefaultTarget; 0 (a program embedding the bridge, whose
	// heap is not only the bridge's): none, Go's soft limit is the
	// derived limit's.
	MemoryTarget int64
}

// Endpoint describes one receiver or sink for people: where it listens,
// connects or writes.
type Endpoint struct {
	Name, Type string
	// Where says it, e.g. "listening on 127.0.0.1:10133".
	Where string
	// Policy of a sink (durable or best-effort).
	Policy string
}

// Server is a bridge built from a configuration, ready to run.
type Server struct {
	Engine    *engine.Engine
	Receivers []Endpoint
	Sinks     []Endpoint
	// MetricsAddr is the bound address of the metrics endpoint ("" if none).
	MetricsAddr string
	// HTTPAddr is the bound address of the HTTP API ("" if none),
	// HTTPScheme http or https.
	HTTPAddr, HTTPScheme string
	// Metrics are the bridge's metrics.
	Metrics *metrics.Registry
	// Shared is what the components share (the host table, the live
	// view, …).
	Shared *pipeline.Shared
	// Built are the sinks as built, by name (the HTTP API finds the trace
	// store among them).
	Built map[string]pipeline.BuiltSink
	// StreamURL is the NATS URL of the live stream ("" without one); the
	// WebSocket endpoint (stream.NewHandler) subscribes there.
	StreamURL string
	// Memory is the process's memory limit (memory_limit, or derived from
	// the machine) and target (memory_target; Settings.MemoryTarget when
	// neither key is set); MemoryFrom says where the limit comes from.
	Memory     *memlimit.Limiter
	MemoryFrom string

	closers []func() error // receivers and sinks, if Run never runs
	hosts   *hostdb.DB     // the host table (nil when nothing needs it)
	live    *livestream.Handler
	metrics *http.Server
	mln     net.Listener
	web     *httpListener // the http: listener (http.go)
	cl      *clusterPart  // a cluster node's parts (cluster.go)

	cfg       *config.Config
	factories *pipeline.Factories
	base      pipeline.Settings
	rmu       sync.Mutex
	receivers map[string]pipeline.Receiver // built receivers, by name
}

// Build creates everything cfg names. Receivers bind their ports here, so
// their addresses are known (and a port in use fails) before Run. Errors
// wrap ErrMapping, ErrConfig or ErrComm; a port in use is an
// *AddrInUseError naming the listener.
func Build(cfg *config.Config, set Settings) (*Server, error) {
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics != "" {
		// The metrics endpoint has no TLS: off loopback only with
		// metrics_insecure (internal/listenpolicy).
		if err := listenpolicy.Check("metrics", cfg.Metrics, false, cfg.MetricsInsecure, "the http: listener's /metrics with tls: {cert, key} instead"); err != nil {
			return nil, pipeline.Classify(ErrConfig, fmt.Errorf("%w (here the key is metrics_insecure: true)", err))
		}
	}
	if set.Factories == nil {
		set.Factories = DefaultFactories()
	}
	if err := cfg.Normalize(); err != nil {
		return nil, pipeline.Classify(ErrConfig, err)
	}
	cat := trace.Types()
	if len(cfg.Libraries) > 0 {
		if _, err := irl.LoadInto(cat, cfg.Libraries...); err != nil {
			return nil, pipeline.Classify(ErrConfig, fmt.Errorf("record types: %w", err))
		}
	}
	reg := metrics.New()
	s := &Server{Metrics: reg, Shared: &pipeline.Shared{}}
	// The memory limit first: the receivers built below ask it.
	limit, from := int64(cfg.MemoryLimit), "memory_limit"
	target := int64(cfg.MemoryTarget)
	if limit == 0 {
		limit, from = memlimit.Default()
		if target == 0 && cfg.Cluster == nil {
			// Not on a cluster node: its embedded NATS server's
			// memory (JetStream's caches, routes) is in the same heap
			// and was not measured against the default target.
			target = set.MemoryTarget
		}
	}
	mopt := memlimit.Options{Limit: limit, Target: target, Reserve: memlimit.FileRSS(), Logger: set.Logger}
	if os.Getenv("GOMEMLIMIT") == "" {
		// Run puts the soft limit back when the limiter stops.
		mopt.SetSoft = func(n int64) { debug.SetMemoryLimit(n) }
	}
	s.Memory, s.MemoryFrom = memlimit.New(mopt), from
	s.Shared.SetMemory(s.Memory)
	reg.SetMemory(func() metrics.MemoryFigures {
		st := s.Memory.Stats()
		return metrics.MemoryFigures{Limit: st.Limit, Usage: st.Usage, Refusing: st.Refusing}
	})
	s.Engine = engine.New(engine.Settings{
		Logger:           set.Logger,
		Metrics:          reg,
		QueueBatches:     cfg.QueueBatches,
		FlushInterval:    time.Duration(cfg.FlushInterval),
		ShutdownTimeout:  time.Duration(cfg.ShutdownTimeout),
		ShutdownHint:     set.ShutdownHint,
		Listener:         set.Listener,
		ListenerInterval: set.ListenerInterval,
		Traces: trace.Options{
			Window:        time.Duration(cfg.Traces.Window),
			MaxOpenTraces: cfg.Traces.MaxOpenTraces,
			MaxSpans:      cfg.Traces.MaxSpans,
			MaxHeldEvents: heldEvents(s.Memory),
		},
		AssemblyWorkers: cfg.Traces.Workers,
		Stopping:        func() { s.web.stop() },
	})
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	base := pipeline.Settings{Logger: set.Logger, Metrics: reg, DataDir: cfg.DataDir, Catalog: cat, Shared: s.Shared}
	s.cfg, s.factories, s.base, s.receivers = cfg, set.Factories, base, map[string]pipeline.Receiver{}
	f := set.Factories

	// Every component's own configuration first: a typo anywhere is
	// reported before a port is bound or a directory created.
	var errs []error
	stages := cfg.Stages
	if len(cfg.Split) > 0 {
		stages = append([]config.Component{config.NewComponent(split.Type, map[string]any{"boundaries": cfg.Split})}, stages...)
		stages[0].Name = "split"
	}
	stages = impliedStages(f, cfg.Receivers, stages)
	type planned struct {
		comp *config.Component
		cfg  pipeline.Config
	}
	decode := func(what string, c *config.Component, newCfg func() pipeline.Config) planned {
		pc := newCfg()
		if err := c.Decode(pc); err != nil {
			errs = append(errs, fmt.Errorf("%s %s (%s): %w", what, c.Name, c.Type, err))
			return planned{}
		}
		if err := pc.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s %s (%s): %w", what, c.Name, c.Type, err))
			return planned{}
		}
		return planned{c, pc}
	}
	// plan decodes the components cs of one kind; newCfg gives a type's
	// configuration, nil for a type the factories do not know.
	plan := func(what string, cs []config.Component, newCfg func(typ string) func() pipeline.Config, types func() []string) []planned {
		var out []planned
		for i := range cs {
			c := &cs[i]
			nc := newCfg(c.Type)
			if nc == nil {
				errs = append(errs, fmt.Errorf("%s %s: unknown type %q (want one of %v)", what, c.Name, c.Type, types()))
				continue
			}
			out = append(out, decode(what, c, nc))
		}
		return out
	}
	for i := range stages {
		if stages[i].Name == "" {
			stages[i].Name = stages[i].Type
		}
	}
	recvs := plan("receiver", cfg.Receivers, func(typ string) func() pipeline.Config {
		if rf := f.Receiver(typ); rf != nil {
			return rf.NewConfig
		}
		return nil
	}, f.ReceiverTypes)
	stgs := plan("stage", stages, func(typ string) func() pipeline.Config {
		if sf := f.Stage(typ); sf != nil {
			return sf.NewConfig
		}
		return nil
	}, f.StageTypes)
	if cfg.Cluster != nil {
		for _, p := range stgs {
			clusterStage(p.cfg)
		}
	}
	sinks := plan("sink", cfg.Sinks, func(typ string) func() pipeline.Config {
		if sf := f.Sink(typ); sf != nil {
			return sf.NewConfig
		}
		return nil
	}, f.SinkTypes)
	// The top-level stream: a best-effort stream sink, with the control
	// stage first among the stages. It stays a case of its own, not a
	// factory with declared dependencies, because it is not a sink entry:
	// it is the bridge's one live stream, and its key configures three
	// things at once that a `sinks:` entry of type stream must keep not
	// having (existing YAML lists plain extra streams that way): the
	// remote control (the control stage, exactly one, before every
	// configured stage, whose probe controllers the stream's key names),
	// the receivers list it announces (known only once the receivers are
	// built, so it is built after every other sink), and the web UI's live
	// view (its URL). A dependency declared by the stream sink factory
	// would give every listed stream sink a control stage and the live
	// view, or need a flag telling the top-level one apart: this case under
	// another name. See docs/ARCHITECTURE.md, "Components own their
	// configuration".
	var stream planned
	if cfg.Stream != nil {
		c := *cfg.Stream
		c.Type, c.Name = streamsink.Type, streamsink.Type
		if p := decode("stream", &c, streamsink.Factory().NewConfig); p.comp != nil && p.cfg.(*streamsink.Config).On() {
			stream = p
		}
	}
	if stream.comp != nil && cfg.Cluster != nil {
		if sc := stream.cfg.(*streamsink.Config); sc.Listen != "" || sc.URL != "" || sc.TLS.Enabled() || sc.Insecure {
			errs = append(errs, errors.New("stream: listen, url, tls and insecure: a cluster node's stream is the cluster's one repository on the cluster's NATS (cluster: nats_listen, or nats); leave them out (docs/CLUSTER.md, \"Live stream\")"))
		}
	}
	if len(errs) > 0 {
		return nil, pipeline.Classify(ErrConfig, errors.Join(errs...))
	}

	if stream.comp != nil {
		set := base
		set.Name = control.Type
		st, err := control.Factory().NewStage(&control.FactoryConfig{ProbeControllers: stream.cfg.(*streamsink.Config).ProbeControllers}, set)
		if err != nil {
			return nil, pipeline.Classify(ErrConfig, fmt.Errorf("stream: remote control: %w", err))
		}
		s.Engine.AddStage(st)
	}
	for _, p := range stgs {
		set := base
		set.Name = p.comp.Name
		st, err := f.Stage(p.comp.Type).NewStage(p.cfg, set)
		if err != nil {
			return nil, pipeline.Classify(ErrConfig, fmt.Errorf("stage %s: %w", p.comp.Name, err))
		}
		s.Engine.AddStage(st)
	}
	// Without stages nothing changes the records between the receivers and
	// the sinks: receivers may keep the bytes they decoded (record.Frames)
	// when a sink copies them.
	if stream.comp == nil && len(stgs) == 0 {
		for _, p := range sinks {
			if ft, ok := p.cfg.(pipeline.FramesTaker); ok && ft.TakesFrames() {
				base.Frames = true
			}
		}
		// When every sink writes frames as it writes records (binary
		// Kieker logs) and no cluster publishes them, nothing reads the
		// values of the types none of them reads: receivers may hand
		// those records on as frames only.
		var takers []pipeline.FramesOnlyTaker
		for _, p := range sinks {
			if ft, ok := p.cfg.(pipeline.FramesOnlyTaker); ok && ft.TakesFrames() {
				takers = append(takers, ft)
			}
		}
		if base.Frames && cfg.Cluster == nil && len(takers) == len(sinks) {
			base.FramesOnly = func(t *record.Type) bool {
				for _, ft := range takers {
					if ft.ReadsValues(t) {
						return false
					}
				}
				return true
			}
		}
	}
	s.base = base
	// Receivers and the metrics port before the sinks: a port in use
	// should not leave an empty log directory behind.
	for _, p := range recvs {
		set := base
		set.Name = p.comp.Name
		r, err := f.Receiver(p.comp.Type).NewReceiver(p.cfg, set)
		if err != nil {
			return nil, inUse("receiver", p.comp.Name, p.comp.Type, pipeline.Classify(ErrConfig, fmt.Errorf("receiver %s: %w", p.comp.Name, err)))
		}
		s.closers = append(s.closers, r.Close)
		s.Receivers = append(s.Receivers, Endpoint{Name: p.comp.Name, Type: f.Receiver(p.comp.Type).Type(), Where: r.Where()})
		s.receivers[p.comp.Name] = r
		s.Engine.AddSource(p.comp.Name, r)
	}
	if cfg.Metrics != "" {
		ln, err := net.Listen("tcp", cfg.Metrics)
		if err != nil {
			return nil, inUse("metrics", "", "", pipeline.Classify(ErrComm, fmt.Errorf("metrics: %w", err)))
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", reg.Handler())
		s.mln = ln
		s.MetricsAddr = ln.Addr().String()
		listenpolicy.Warn(set.Logger, "metrics", s.MetricsAddr, false)
		s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	}
	if cfg.HTTP.Listen != "" {
		if err := s.listenHTTP(cfg.HTTP, set); err != nil {
			return nil, inUse("http", "", "", err)
		}
	}
	if needsHosts(cfg) {
		// After the ports (a port in use leaves no directory behind),
		// before the sinks (the store sink asks it).
		db, err := hostdb.Open(filepath.Join(cfg.DataDir, "hosts"), hostdb.Options{Logger: set.Logger})
		if err != nil {
			return nil, pipeline.Classify(ErrConfig, err)
		}
		s.hosts = db
		s.Shared.SetHostDB(db)
	}
	var clusterSink *storesink.Sink
	var compactor atomic.Pointer[cluster.Node] // the cluster node, once started
	for _, p := range sinks {
		set := base
		set.Name = p.comp.Name
		sf := f.Sink(p.comp.Type)
		inCluster := cfg.Cluster != nil && p.comp.Type == storesink.Type && clusterSink == nil
		if inCluster {
			if sc := p.cfg.(*storesink.Config); sc.Backend != objstore.BackendS3 {
				return nil, pipeline.Classify(ErrConfig, fmt.Errorf("cluster: sink %s: a node's store needs backend: s3, the bucket every node shares (the local backend keeps a node's blocks to itself)", p.comp.Name))
			}
			if err := clusterWAL(p.cfg.(*storesink.Config), cfg.DataDir); err != nil {
				return nil, pipeline.Classify(ErrConfig, err)
			}
			// Every node's store writes into and reads every node's
			// blocks; one node at a time (the holder of partition 0's
			// lease) applies retention and compacts.
			sc := p.cfg.(*storesink.Config)
			sc.Node = cfg.Cluster.Node
			sc.MayCompact = func() bool { n := compactor.Load(); return n != nil && n.Compactor() }
		}
		policy := sf.Policy()
		if p.comp.Policy != "" {
			policy, _ = pipeline.ParsePolicy(p.comp.Policy) // checked by Normalize
		}
		set.Policy = policy
		w, err := sf.NewSink(p.cfg, set)
		if err != nil {
			return nil, inUse("sink", p.comp.Name, p.comp.Type, pipeline.Classify(ErrConfig, fmt.Errorf("sink %s: %w", p.comp.Name, err)))
		}
		s.closers = append(s.closers, w.Close)
		if s.Built == nil {
			s.Built = map[string]pipeline.BuiltSink{}
		}
		s.Built[p.comp.Name] = w
		s.Sinks = append(s.Sinks, Endpoint{Name: p.comp.Name, Type: sf.Type(), Where: w.Where(), Policy: policy.String()})
		if inCluster {
			// The partitions' owner feeds it (cluster.go), not the engine.
			clusterSink = w.(*storesink.Sink)
			continue
		}
		s.Engine.AddSink(p.comp.Name, w, engine.SinkOptions{Policy: policy, QueueBatches: p.comp.QueueBatches})
	}
	if cfg.Cluster != nil {
		if clusterSink == nil {
			return nil, pipeline.Classify(ErrConfig, errors.New("cluster: a node needs a store sink for the traces of the partitions it owns (sinks: [{type: store, backend: s3, s3: {…}}], the bucket every node shares)"))
		}
		if err := s.startCluster(cfg, clusterSink, set); err != nil {
			return nil, err
		}
		compactor.Store(s.cl.node)
	}
	if stream.comp != nil {
		if s.cl != nil {
			// Every node publishes into the cluster's one repository.
			cc := cfg.Cluster
			stream.cfg.(*streamsink.Config).Cluster = &streamsink.ClusterTarget{Node: cc.Node, Server: s.cl.srv,
				URL: cc.NATS, Login: s.cl.login, Replicas: cc.Replicas}
		}
		if err := s.addStream(stream.comp, stream.cfg, base); err != nil {
			return nil, inUse("stream", "", "", err)
		}
		live := s.Built[stream.comp.Name].(*streamsink.Sink)
		if s.cl != nil && stream.cfg.(*streamsink.Config).Traces {
			s.cl.live.Store(live) // the owners publish what they assemble
		}
		// The web UI's live view: the stream over WebSocket, at /api/live.
		user, pass := live.Credentials()
		lo := livestream.Options{User: user, Password: pass}
		if s.cl != nil && s.cl.srv == nil {
			lo.Token, lo.NATSCreds, lo.TLS = s.cl.login.Token, s.cl.login.CredsFile, s.cl.login.TLS
		}
		s.live = livestream.NewHandler(s.StreamURL, livestream.HandlerOptions{Options: lo, Logger: set.Logger,
			MaxClients: cfg.HTTP.LiveMaxClients, MaxClientBuffer: cfg.HTTP.LiveClientBuffer})
		s.Shared.SetLive(s.live)
	}
	ok = true
	return s, nil
}

// needsHosts says whether the bridge keeps a host table: for zico's,
// OTLP's and jfr-http's host authentication, the store sink's host bounds and the HTTP
// API's hosts pages.
func needsHosts(cfg *config.Config) bool {
	if cfg.HTTP.Listen != "" {
		return true
	}
	for _, r := range cfg.Receivers {
		switch r.Type {
		case zico.Type, otlp.TypeGRPC, otlp.TypeHTTP, jfrhttp.Type:
			return true
		}
	}
	for _, c := range cfg.Sinks {
		if c.Type == storesink.Type {
			return true
		}
	}
	return false
}

// impliedStage is a stage factory that declares the receiver types whose
// data its stage is for (the profile stage: jfr).
type impliedStage interface {
	ImpliedBy() []string
}

// impliedStages adds, after the configured stages, a stage with its
// defaults for every stage type implied by a configured receiver's type
// when no stage of that type is configured (a jfr receiver brings a
// profile stage: JFR execution samples on the spans of their thread).
func impliedStages(f *pipeline.Factories, receivers, stages []config.Component) []config.Component {
	for _, sf := range f.Stages {
		im, ok := sf.(impliedStage)
		if !ok || slices.ContainsFunc(stages, func(c config.Component) bool { return c.Type == sf.Type() }) {
			continue
		}
		by := im.ImpliedBy()
		if !slices.ContainsFunc(receivers, func(c config.Component) bool {
			rf := f.Receiver(c.Type)
			return rf != nil && slices.Contains(by, rf.Type())
		}) {
			continue
		}
		p := config.NewComponent(sf.Type(), nil)
		p.Name = sf.Type()
		stages = append(slices.Clone(stages), p)
	}
	return stages
}

// addStream builds the top-level stream sink and tells it the receivers.
func (s *Server) addStream(comp *config.Component, cfg pipeline.Config, base pipeline.Settings) error {
	set := base
	set.Name = comp.Name
	// Best-effort unless the section says `policy: durable`; a
	// best-effort stream's queue holds a burst (DefaultQueueBatches).
	set.Policy = pipeline.BestEffort
	if comp.Policy != "" {
		set.Policy, _ = pipeline.ParsePolicy(comp.Policy) // checked by Normalize
	}
	queue := comp.QueueBatches
	if queue == 0 && set.Policy == pipeline.BestEffort {
		queue = streamsink.DefaultQueueBatches
	}
	w, err := streamsink.New(cfg.(*streamsink.Config), set)
	if err != nil {
		return pipeline.Classify(ErrConfig, err)
	}
	s.closers = append(s.closers, w.Close)
	var rs []streammsg.ReceiverInfo
	for _, r := range s.Receivers {
		rs = append(rs, streammsg.ReceiverInfo{Name: r.Name, Type: r.Type, Where: r.Where})
	}
	w.SetReceivers(rs)
	if s.Built == nil {
		s.Built = map[string]pipeline.BuiltSink{}
	}
	s.Built[comp.Name] = w
	s.StreamURL = w.URL()
	s.Engine.AddSink(comp.Name, w, engine.SinkOptions{Policy: set.Policy, QueueBatches: queue})
	s.Sinks = append(s.Sinks, Endpoint{Name: comp.Name, Type: streamsink.Type, Where: w.Where(), Policy: set.Policy.String()})
	return nil
}

// GoMemoryLimit is the Go runtime's soft limit Run sets from the memory
// target, or the limit without one (memlimit's GoTarget: GoPercent of it
// less the binary's pages in memory), and keeps while usage stays below
// four fifths of it (memlimit.SoftLimit raises it above); 0 when the
// environment's GOMEMLIMIT is kept.
func (s *Server) GoMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return s.Memory.GoTarget()
}

// Run serves metrics (if configured) and runs the bridge until ctx is
// cancelled or the receivers end. While it runs, the memory limiter
// samples and sets the Go runtime's soft memory limit (GoMemoryLimit,
// memlimit.SoftLimit; not when GOMEMLIMIT is set), which Run puts back
// when it returns; once ctx is cancelled the limiter stops refusing, so
// the receivers drain.
func (s *Server) Run(ctx context.Context) error {
	if s.GoMemoryLimit() > 0 {
		prev := debug.SetMemoryLimit(-1)
		defer debug.SetMemoryLimit(prev) // after the limiter stopped
	}
	mctx, mcancel := context.WithCancel(ctx)
	mdone := make(chan struct{})
	go func() { s.Memory.Run(mctx); close(mdone) }()
	defer func() { mcancel(); <-mdone }()
	if s.metrics != nil {
		go s.metrics.Serve(s.mln)
		defer s.metrics.Close()
	}
	if s.live != nil {
		defer s.live.Close() // after the web listener stopped
	}
	if s.web != nil {
		go s.web.serve(s.base.Logger.Error)
		defer s.web.stop()
	}
	var stopCluster func() error
	if s.cl != nil {
		stopCluster = s.cl.run(ctx)
		s.runClusterState(ctx, s.cl.node, s.cfg.Cluster.Node, s.cfg.Cluster.Replicas, "s3")
	}
	err := s.Engine.Run(ctx)
	if stopCluster != nil {
		// After the receivers drained into the stream: the owners hand
		// on what they hold, checkpoint and release their partitions.
		err = errors.Join(err, stopCluster(), s.cl.close())
	}
	if s.hosts != nil {
		// After the sinks closed: the store sink tells it of contacts.
		if cerr := s.hosts.Close(); cerr != nil {
			s.base.Logger.Warn("host table: closing", "err", cerr)
		}
	}
	return err
}

// Close releases what Build created when Run is not going to run.
func (s *Server) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	if s.mln != nil {
		errs = append(errs, s.mln.Close())
	}
	if s.web != nil {
		s.web.stop()
	}
	if s.live != nil {
		s.live.Close()
	}
	if s.cl != nil {
		errs = append(errs, s.cl.close())
	}
	if s.hosts != nil {
		errs = append(errs, s.hosts.Close())
	}
	return errors.Join(errs...)
}

// ReceiverStatus describes a receiver for the console.
type ReceiverStatus struct {
	Endpoint
	State engine.SourceState `json:"state"`
	Since time.Time          `json:"since"`
	Err   string             `json:"error,omitempty"`
}

// ReceiverStatuses describes every receiver.
func (s *Server) ReceiverStatuses() []ReceiverStatus {
	states := map[string]engine.SourceStatus{}
	for _, st := range s.Engine.Sources() {
		states[st.Name] = st
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	var out []ReceiverStatus
	for _, ep := range s.Receivers {
		st := states[ep.Name]
		out = append(out, ReceiverStatus{Endpoint: ep, State: st.State, Since: st.Since, Err: st.Err})
	}
	return out
}

// StopReceiver stops a running receiver (it drains first) and releases its
// port; the bridge goes on.
func (s *Server) StopReceiver(name string) error {
	if err := s.Engine.StopSource(name); err != nil {
		return err
	}
	s.rmu.Lock()
	r := s.receivers[name]
	s.rmu.Unlock()
	if r != nil {
		return r.Close()
	}
	return nil
}

// StartReceiver builds a stopped (or ended) receiver again from its
// configuration and runs it.
func (s *Server) StartReceiver(name string) error {
	var comp *config.Component
	for i := range s.cfg.Receivers {
		if s.cfg.Receivers[i].Name == name {
			comp = &s.cfg.Receivers[i]
		}
	}
	if comp == nil {
		return fmt.Errorf("no receiver %s", name)
	}
	r, ep, err := s.buildReceiver(comp)
	if err != nil {
		return err
	}
	if err := s.Engine.StartSource(name, r); err != nil {
		r.Close()
		return err
	}
	s.rmu.Lock()
	s.receivers[name] = r
	for i := range s.Receivers {
		if s.Receivers[i].Name == name {
			s.Receivers[i] = ep
		}
	}
	s.rmu.Unlock()
	return nil
}

// AddReceiver validates a receiver's configuration, builds it and runs it
// (the console's form); it becomes part of the effective configuration.
func (s *Server) AddReceiver(comp config.Component) (Endpoint, error) {
	s.rmu.Lock()
	if comp.Name == "" {
		comp.Name = comp.Type
		for i := 2; s.receivers[comp.Name] != nil; i++ {
			comp.Name = fmt.Sprintf("%s-%d", comp.Type, i)
		}
	}
	_, dup := s.receivers[comp.Name]
	s.rmu.Unlock()
	if dup {
		return Endpoint{}, pipeline.Classify(ErrConfig, fmt.Errorf("receiver %s: name used twice", comp.Name))
	}
	r, ep, err := s.buildReceiver(&comp)
	if err != nil {
		return Endpoint{}, err
	}
	if err := s.Engine.StartSource(comp.Name, r); err != nil {
		r.Close()
		return Endpoint{}, err
	}
	s.rmu.Lock()
	s.receivers[comp.Name] = r
	s.Receivers = append(s.Receivers, ep)
	s.cfg.Receivers = append(s.cfg.Receivers, comp)
	s.rmu.Unlock()
	return ep, nil
}

// buildReceiver decodes, validates and builds one receiver.
func (s *Server) buildReceiver(c *config.Component) (pipeline.Receiver, Endpoint, error) {
	rf := s.factories.Receiver(c.Type)
	if rf == nil {
		return nil, Endpoint{}, pipeline.Classify(ErrConfig, fmt.Errorf("receiver %s: unknown type %q (want one of %v)", c.Name, c.Type, s.factories.ReceiverTypes()))
	}
	pc := rf.NewConfig()
	if err := c.Decode(pc); err != nil {
		return nil, Endpoint{}, pipeline.Classify(ErrConfig, fmt.Errorf("receiver %s (%s): %w", c.Name, c.Type, err))
	}
	if err := pc.Validate(); err != nil {
		return nil, Endpoint{}, pipeline.Classify(ErrConfig, fmt.Errorf("receiver %s (%s): %w", c.Name, c.Type, err))
	}
	set := s.base
	set.Name = c.Name
	r, err := rf.NewReceiver(pc, set)
	if err != nil {
		return nil, Endpoint{}, pipeline.Classify(ErrConfig, fmt.Errorf("receiver %s: %w", c.Name, err))
	}
	return r, Endpoint{Name: c.Name, Type: rf.Type(), Where: r.Where()}, nil
}

// Config returns the effective configuration as YAML (receivers added from
// the console included; secrets as the user gave them, so the file is
// for the user).
func (s *Server) Config() ([]byte, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	// The values in effect where the file leaves the defaults.
	c := *s.cfg
	def := func(v *pipeline.Duration, d time.Duration) {
		if *v == 0 {
			*v = pipeline.Duration(d)
		}
	}
	if c.QueueBatches <= 0 {
		c.QueueBatches = engine.DefaultQueueBatches
	}
	if c.MemoryLimit == 0 {
		c.MemoryLimit = pipeline.ByteSize(s.Memory.Limit())
	}
	if c.MemoryTarget == 0 {
		c.MemoryTarget = pipeline.ByteSize(s.Memory.Target())
	}
	def(&c.FlushInterval, engine.DefaultFlushInterval)
	def(&c.ShutdownTimeout, engine.DefaultShutdownTimeout)
	def(&c.Traces.Window, trace.DefaultWindow)
	if c.Traces.MaxOpenTraces <= 0 {
		c.Traces.MaxOpenTraces = trace.DefaultMaxOpenTraces
	}
	if c.Traces.MaxSpans <= 0 {
		c.Traces.MaxSpans = trace.DefaultMaxSpans
	}
	return c.Marshal()
}

// Factories returns the component types the server can build.
func (s *Server) Factories() *pipeline.Factories { return s.factories }

// Catalog returns the record types.
func (s *Server) Catalog() *record.Catalog { return s.base.Catalog }

// heldEvents bounds the Kieker events the trace assembler buffers: an
// eighth of the Go runtime's share of the memory target (as the store's
// heads), 16 bytes an event; 0 (the assembler's default) without one.
func heldEvents(m pipeline.Memory) int {
	if b := m.Budget(); b > 0 {
		return int(b / 8 / 16)
	}
	return 0
}
