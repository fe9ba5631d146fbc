// Package serve builds a running bridge from a configuration: it loads the
// record types and mappings, creates the receivers, stages and sinks the
// configuration names, serves the metrics endpoint, and runs the bridge.
// It is what `tracebridge serve` runs; the bridge core itself
// (internal/bridge) knows none of the concrete receivers or sinks.
package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridge"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/sink/forward"
	"github.com/tracebridge/tracebridge/internal/sink/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/source/broker"
	mqttsrc "github.com/tracebridge/tracebridge/internal/source/mqtt"
	natssrc "github.com/tracebridge/tracebridge/internal/source/nats"
	stompsrc "github.com/tracebridge/tracebridge/internal/source/stomp"
	"github.com/tracebridge/tracebridge/internal/source/tcp"
	"github.com/tracebridge/tracebridge/internal/stage/split"
	"github.com/tracebridge/tracebridge/internal/stage/timeunit"
)

// Error classes, matching the Kieker Data Bridge's exit codes: a mapping
// file (1), the configuration (2), communication (3).
var (
	ErrMapping = errors.New("mapping file")
	ErrConfig  = errors.New("configuration")
	ErrComm    = errors.New("communication")
)

type classified struct {
	class error
	err   error
}

func (e classified) Error() string   { return e.err.Error() }
func (e classified) Unwrap() []error { return []error{e.class, e.err} }

func classify(class, err error) error {
	if err == nil {
		return nil
	}
	return classified{class, err}
}

// Settings are what the caller injects.
type Settings struct {
	Logger *slog.Logger
	// Listener and ListenerInterval report progress (see bridge.Settings).
	Listener         bridge.Listener
	ListenerInterval int64
}

// Endpoint describes one receiver or sink for people: where it listens,
// connects or writes.
type Endpoint struct {
	Name, Type string
	Where      string
}

// Server is a bridge built from a configuration, ready to run.
type Server struct {
	Bridge    *bridge.Bridge
	Receivers []Endpoint
	Sinks     []Endpoint
	// MetricsAddr is the bound address of the metrics endpoint ("" if none).
	MetricsAddr string

	closers []func() error // receivers' listeners, if Run never runs
	brokers []*natssrc.Server
	metrics *http.Server
	mln     net.Listener
}

// Build creates everything cfg names. Receivers bind their ports here, so
// their addresses are known (and a port in use fails) before Run. Errors
// wrap ErrMapping, ErrConfig or ErrComm.
func Build(cfg *config.Config, set Settings) (*Server, error) {
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Normalize(); err != nil {
		return nil, classify(ErrConfig, err)
	}
	cat := record.Builtin()
	if len(cfg.Libraries) > 0 {
		if _, err := irl.LoadInto(cat, cfg.Libraries...); err != nil {
			return nil, classify(ErrConfig, fmt.Errorf("record types: %w", err))
		}
	}
	reg := metrics.New()
	s := &Server{}
	s.Bridge = bridge.New(bridge.Settings{
		Logger:           set.Logger,
		Metrics:          reg,
		QueueBatches:     cfg.QueueBatches,
		FlushInterval:    time.Duration(cfg.FlushInterval),
		ShutdownTimeout:  time.Duration(cfg.ShutdownTimeout),
		Listener:         set.Listener,
		ListenerInterval: set.ListenerInterval,
	})
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if len(cfg.Split) > 0 {
		if err := s.addSplit(cfg.Split, cat, set.Logger); err != nil {
			return nil, err
		}
	}
	// Receivers and the metrics port first: a port in use should not leave
	// an empty log directory behind.
	for i := range cfg.Receivers {
		if err := s.addReceiver(&cfg.Receivers[i], cfg.DataDir, cat, reg, set.Logger); err != nil {
			return nil, err
		}
	}
	if cfg.Metrics != "" {
		ln, err := net.Listen("tcp", cfg.Metrics)
		if err != nil {
			return nil, classify(ErrComm, fmt.Errorf("metrics: %w", err))
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", reg.Handler())
		s.mln = ln
		s.MetricsAddr = ln.Addr().String()
		s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	}
	for i := range cfg.Sinks {
		if err := s.addSink(&cfg.Sinks[i], cfg.DataDir, cat, reg, set.Logger); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

func (s *Server) addReceiver(rc *config.Receiver, dataDir string, cat *record.Catalog, reg *metrics.Registry, log *slog.Logger) error {
	switch rc.Type {
	case config.StompClient, config.NATSClient, config.MQTTClient, config.BrokerEmbedded:
		return s.addBrokerReceiver(rc, dataDir, cat, reg, log)
	}
	tc := tcp.Config{
		Name:           rc.Name,
		MaxConnections: rc.MaxConnections,
		ReadBuffer:     rc.ReadBuffer,
		DrainTimeout:   time.Duration(rc.DrainTimeout),
		Respawn:        rc.Respawn,
	}
	kopts := kieker.Options{
		Catalog:       cat,
		MaxStringLen:  rc.MaxStringLen,
		MaxArrayLen:   rc.MaxArrayLen,
		JavaCharCount: rc.JavaCharCount,
	}
	kdbDecoder := func() (func() tcp.Decoder, error) {
		m, err := mapping(rc.Mapping, cat)
		if err != nil {
			return nil, err
		}
		return tcp.KDBDecoder(m, kdb.Options{MaxStringLen: rc.MaxStringLen, MaxArrayLen: rc.MaxArrayLen, MaxRecordSize: rc.MaxRecordSize}), nil
	}
	var err error
	switch rc.Type {
	case config.TCPServer, config.TCPSingleServer:
		tc.Mode = tcp.Server
		if rc.Type == config.TCPSingleServer {
			tc.Mode = tcp.SingleServer
		}
		tc.Address = rc.Listen
		tc.NewDecoder, err = kdbDecoder()
	case config.TCPClient:
		tc.Mode = tcp.Client
		tc.Address = rc.Connect
		if rc.Format == "kieker" {
			tc.NewDecoder = tcp.KiekerDecoder(kopts)
		} else {
			tc.NewDecoder, err = kdbDecoder()
		}
	case config.KiekerTCP:
		tc.Mode = tcp.Server
		tc.Address = rc.Listen
		tc.NewDecoder = tcp.KiekerDecoder(kopts)
	case config.KiekerTCPDual:
		tc.Mode = tcp.Dual
		tc.Address = rc.Listen
		tc.RegistryAddress = rc.RegistryListen
		tc.Kieker = kopts
	default:
		return classify(ErrConfig, fmt.Errorf("receiver %s: unknown type %q", rc.Name, rc.Type))
	}
	if err != nil {
		return err
	}
	conv, err := timeunit.New(rc.TimestampUnit, cat)
	if err != nil {
		return classify(ErrConfig, fmt.Errorf("receiver %s: %w", rc.Name, err))
	}
	if conv != nil {
		tc.Transform = conv.Apply
	}
	r, err := tcp.New(tc, tcp.Settings{Logger: log, Metrics: reg.Receiver(rc.Name)})
	if err != nil {
		class := ErrConfig
		if errors.Is(err, tcp.ErrListen) {
			class = ErrComm
		}
		return classify(class, fmt.Errorf("receiver %s: %w", rc.Name, err))
	}
	s.closers = append(s.closers, r.Close)
	where := rc.Connect
	if a := r.Addr(); a != nil {
		where = a.String()
	}
	if a := r.RegistryAddr(); a != nil {
		where += " (registry " + a.String() + ")"
	}
	s.Receivers = append(s.Receivers, Endpoint{Name: rc.Name, Type: rc.Type, Where: where})
	s.Bridge.AddSource(rc.Name, bridge.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		err := r.Run(ctx, out)
		if errors.Is(err, tcp.ErrConnect) {
			return classify(ErrComm, err)
		}
		return err
	}))
	return nil
}

func mapping(path string, cat *record.Catalog) (*kdb.Mapping, error) {
	if path == "" {
		m, err := kdb.DefaultMapping(cat)
		return m, classify(ErrMapping, err)
	}
	m, err := kdb.LoadMapping(path, cat)
	return m, classify(ErrMapping, err)
}

func (s *Server) addSink(sc *config.Sink, dataDir string, cat *record.Catalog, reg *metrics.Registry, log *slog.Logger) error {
	switch sc.Type {
	case config.KiekerLog:
		kc, err := kiekerLogConfig(sc, dataDir)
		if err != nil {
			return classify(ErrConfig, fmt.Errorf("sink %s: %w", sc.Name, err))
		}
		w, err := kiekerlog.New(kc)
		if err != nil {
			return classify(ErrConfig, fmt.Errorf("sink %s: %w", sc.Name, err))
		}
		s.closers = append(s.closers, w.Close)
		s.Bridge.AddSink(sc.Name, w)
		s.Sinks = append(s.Sinks, Endpoint{Name: sc.Name, Type: sc.Type, Where: w.Dir()})
	case config.Forward:
		var m *kdb.Mapping
		if sc.Mapping != "" {
			var err error
			if m, err = kdb.LoadMapping(sc.Mapping, cat); err != nil {
				return classify(ErrMapping, fmt.Errorf("sink %s: %w", sc.Name, err))
			}
		}
		f, err := forward.New(forward.Config{URL: sc.URL, Mapping: m, Catalog: cat}, forward.Settings{Logger: log, Metrics: reg.Sink(sc.Name)})
		if err != nil {
			return classify(ErrConfig, fmt.Errorf("sink %s: %w", sc.Name, err))
		}
		s.closers = append(s.closers, f.Close)
		s.Bridge.AddSink(sc.Name, f)
		s.Sinks = append(s.Sinks, Endpoint{Name: sc.Name, Type: sc.Type, Where: sc.URL})
	default:
		return classify(ErrConfig, fmt.Errorf("sink %s: unknown type %q", sc.Name, sc.Type))
	}
	return nil
}

// kiekerLogConfig turns a kieker-log sink's settings (a Kieker properties
// file first, then the sink's own keys, then dataDir for the path) into the
// writer's configuration.
func kiekerLogConfig(sc *config.Sink, dataDir string) (kiekerlog.Config, error) {
	eff := *sc
	if sc.KiekerProperties != "" {
		p, err := config.LoadProperties(sc.KiekerProperties)
		if err != nil {
			return kiekerlog.Config{}, err
		}
		var base config.Sink
		if err := config.ApplyKiekerProperties(p, &base); err != nil {
			return kiekerlog.Config{}, fmt.Errorf("%s: %w", sc.KiekerProperties, err)
		}
		eff = overlay(base, *sc)
	}
	if eff.Path == "" {
		eff.Path = dataDir
	}
	comp, err := logdir.ParseCompression(eff.Compression)
	if err != nil {
		return kiekerlog.Config{}, err
	}
	metadata := true
	if eff.Metadata != nil {
		metadata = *eff.Metadata
	}
	return kiekerlog.Config{
		Path:                eff.Path,
		Binary:              eff.Format != "ascii",
		Compression:         comp,
		MaxEntriesInFile:    eff.MaxEntriesInFile,
		MaxLogSize:          eff.MaxLogSize,
		MaxLogFiles:         eff.MaxLogFiles,
		BufferSize:          eff.BufferSize,
		FlushEachBatch:      eff.FlushEachBatch,
		Hostname:            eff.Hostname,
		ControllerName:      eff.ControllerName,
		Metadata:            metadata,
		SetLoggingTimestamp: eff.SetLoggingTimestamp,
	}, nil
}

// overlay returns base with every field that top sets replaced by top's.
func overlay(base, top config.Sink) config.Sink {
	str := func(b *string, t string) {
		if t != "" {
			*b = t
		}
	}
	num := func(b *int, t int) {
		if t != 0 {
			*b = t
		}
	}
	str(&base.Path, top.Path)
	str(&base.Format, top.Format)
	str(&base.Compression, top.Compression)
	str(&base.Hostname, top.Hostname)
	str(&base.ControllerName, top.ControllerName)
	num(&base.MaxEntriesInFile, top.MaxEntriesInFile)
	num(&base.MaxLogSize, top.MaxLogSize)
	num(&base.MaxLogFiles, top.MaxLogFiles)
	num(&base.BufferSize, top.BufferSize)
	if top.Metadata != nil {
		base.Metadata = top.Metadata
	}
	base.SetLoggingTimestamp = base.SetLoggingTimestamp || top.SetLoggingTimestamp
	base.FlushEachBatch = base.FlushEachBatch || top.FlushEachBatch
	base.Name, base.Type = top.Name, top.Type
	return base
}

// Run serves metrics (if configured) and runs the bridge until ctx is
// cancelled or the receivers end.
func (s *Server) Run(ctx context.Context) error {
	if s.metrics != nil {
		go s.metrics.Serve(s.mln)
		defer s.metrics.Close()
	}
	return s.Bridge.Run(ctx)
}

// Close releases what Build created when Run is not going to run.
func (s *Server) Close() error {
	for _, b := range s.brokers {
		b.Shutdown()
	}
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	if s.mln != nil {
		errs = append(errs, s.mln.Close())
	}
	return errors.Join(errs...)
}

// addBrokerReceiver builds a message-broker receiver: STOMP, NATS, MQTT, or
// the embedded broker (a NATS server with JetStream, and MQTT if asked,
// started here so that its ports are bound before Run) with its consumer.
func (s *Server) addBrokerReceiver(rc *config.Receiver, dataDir string, cat *record.Catalog, reg *metrics.Registry, log *slog.Logger) error {
	m, err := mapping(rc.Mapping, cat)
	if err != nil {
		return fmt.Errorf("receiver %s: %w", rc.Name, err)
	}
	enc, err := broker.ParseFormat(rc.Encoding)
	if err != nil {
		return classify(ErrConfig, fmt.Errorf("receiver %s: %w", rc.Name, err))
	}
	batch := broker.Config{
		Name:    rc.Name,
		Mapping: m,
		Options: kdb.Options{MaxStringLen: rc.MaxStringLen, MaxArrayLen: rc.MaxArrayLen, MaxRecordSize: rc.MaxRecordSize},
		Format:  enc,
	}
	conv, err := timeunit.New(rc.TimestampUnit, cat)
	if err != nil {
		return classify(ErrConfig, fmt.Errorf("receiver %s: %w", rc.Name, err))
	}
	if conv != nil {
		batch.Transform = conv.Apply
	}
	set := broker.Settings{Logger: log, Metrics: reg.Receiver(rc.Name)}
	var (
		src interface {
			Run(context.Context, pipeline.Consumer) error
			Target() string
		}
		where    string
		embedded *natssrc.Server
	)
	switch rc.Type {
	case config.StompClient:
		var tc *tls.Config
		if rc.TLSCA != "" {
			pem, err := os.ReadFile(rc.TLSCA)
			if err != nil {
				return classify(ErrConfig, fmt.Errorf("receiver %s: tls_ca: %w", rc.Name, err))
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return classify(ErrConfig, fmt.Errorf("receiver %s: tls_ca %s holds no PEM certificate", rc.Name, rc.TLSCA))
			}
			tc = &tls.Config{RootCAs: pool}
		}
		r, err := stompsrc.New(stompsrc.Config{
			Name: rc.Name, URL: rc.URL, User: rc.User, Password: rc.Password, VHost: rc.VHost,
			Destination: rc.Destination, DeadLetter: rc.DeadLetter, Prefetch: rc.Prefetch, TLS: tc, Batch: batch,
		}, set)
		if err != nil {
			return classify(ErrConfig, err)
		}
		src, where = r, r.Target()
	case config.NATSClient, config.BrokerEmbedded:
		nc := natssrc.Config{
			Name: rc.Name, URL: rc.URL, User: rc.User, Password: rc.Password, Subject: rc.Destination,
			Stream: rc.Stream, Durable: rc.Durable, MaxAckPending: rc.Prefetch, DeadLetter: rc.DeadLetter, Batch: batch,
		}
		if rc.Type == config.BrokerEmbedded {
			srv, err := startEmbedded(rc, dataDir, log)
			if err != nil {
				return err
			}
			s.brokers = append(s.brokers, srv)
			embedded = srv
			nc.InProcess = srv.InProcess()
			where = "nats://" + srv.Addr()
			if a := srv.MQTTAddr(); a != "" {
				where += " and mqtt://" + a
			}
		}
		r, err := natssrc.New(nc, set)
		if err != nil {
			return classify(ErrConfig, err)
		}
		if embedded != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			err := r.Prepare(ctx)
			cancel()
			if err != nil {
				return classify(ErrComm, err)
			}
		}
		src = r
		if where == "" {
			where = r.Target()
		}
	case config.MQTTClient:
		r, err := mqttsrc.New(mqttsrc.Config{
			Name: rc.Name, URL: rc.URL, User: rc.User, Password: rc.Password, Topic: rc.Destination,
			ClientID: rc.ClientID, DeadLetter: rc.DeadLetter, Inflight: rc.Prefetch, Batch: batch,
		}, set)
		if err != nil {
			return classify(ErrConfig, err)
		}
		src, where = r, r.Target()
	}
	s.Receivers = append(s.Receivers, Endpoint{Name: rc.Name, Type: rc.Type, Where: where})
	s.Bridge.AddSource(rc.Name, bridge.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		err := src.Run(ctx, out)
		if embedded != nil {
			embedded.Shutdown()
		}
		return err
	}))
	return nil
}

func startEmbedded(rc *config.Receiver, dataDir string, log *slog.Logger) (*natssrc.Server, error) {
	host, port, err := splitHostPort(rc.Listen)
	if err != nil {
		return nil, classify(ErrConfig, fmt.Errorf("receiver %s: listen: %w", rc.Name, err))
	}
	sc := natssrc.ServerConfig{Host: host, Port: port, StoreDir: filepath.Join(dataDir, "broker"), Logger: log}
	if rc.MQTTListen != "" {
		mh, mp, err := splitHostPort(rc.MQTTListen)
		if err != nil {
			return nil, classify(ErrConfig, fmt.Errorf("receiver %s: mqtt_listen: %w", rc.Name, err))
		}
		if mh != host {
			return nil, classify(ErrConfig, fmt.Errorf("receiver %s: mqtt_listen must use the host of listen (%s)", rc.Name, host))
		}
		sc.MQTT, sc.MQTTPort = true, mp
	}
	srv, err := natssrc.StartServer(sc)
	if err != nil {
		return nil, classify(ErrComm, fmt.Errorf("receiver %s: %w", rc.Name, err))
	}
	return srv, nil
}

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("port %q", p)
	}
	return h, n, nil
}

// addSplit puts trace splitting between the receivers and the sinks.
func (s *Server) addSplit(specs []string, cat *record.Catalog, log *slog.Logger) error {
	b, err := split.Parse(specs...)
	if err != nil {
		return classify(ErrConfig, fmt.Errorf("split: %w", err))
	}
	limit := &lograte.Limiter{PerSecond: unsplitPerSecond}
	s.Bridge.AddStage(func(next pipeline.Consumer) pipeline.Consumer {
		return split.New(b, next, split.Options{
			Catalog: cat,
			OnMalformed: func(m split.Malformed) {
				limit.Log(context.Background(), log, slog.LevelWarn, "trace passed through unsplit", "trace_id", m.TraceID, "reason", m.Reason)
			},
		})
	})
	return nil
}

// unsplitPerSecond is how many traces passed through unsplit are logged a
// second.
const unsplitPerSecond = 5
