// Package bridge lets a Go program embed tracebridge, as the Kieker Data
// Bridge's ServiceContainer allowed: build receivers, stages and sinks from
// code, run them, observe progress through a listener called every N
// records (default 100, settable), and stop by cancelling the context.
//
//	b := bridge.New(bridge.Settings{Listener: func(n int64, msg string) { … }})
//	r, _ := bridge.NewKDBReceiver(bridge.TCPReceiverConfig{Address: "127.0.0.1:10144"})
//	b.AddSource("kdb", r)
//	w, _ := bridge.NewKiekerLog(bridge.KiekerLogConfig{Path: "logs", Binary: true, Metadata: true})
//	b.AddSink("log", w)
//	err := b.Run(ctx) // until ctx is cancelled: drains, flushes, closes
//
// Everything a `tracebridge serve` configuration can name is also
// available at once through FromConfig. A stage is any function wrapping
// the next Consumer; records arrive in batches (see Batch and Record).
//
// This package is the public face of the internal packages that implement
// the bridge; its types are aliases of theirs.
package bridge

import (
	"log/slog"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/engine"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/mapping"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/serve"
	"github.com/tracebridge/tracebridge/internal/sink/forward"
	"github.com/tracebridge/tracebridge/internal/source/tcp"
)

// The bridge core (see internal/engine for the full documentation).
type (
	// Bridge runs sources, stages and sinks.
	Bridge = engine.Engine
	// Settings configure a Bridge: logger, metrics, queue size, flush
	// interval, shutdown timeout, listener and its interval.
	Settings = engine.Settings
	// SinkOptions say how a sink is fed: its policy (durable, the
	// default, or best-effort) and its queue bound.
	SinkOptions = engine.SinkOptions
	// Source is a receiver: Run hands batches to out until ctx ends.
	Source = pipeline.Source
	// SourceFunc adapts a function to Source.
	SourceFunc = pipeline.SourceFunc
	// Stage wraps the next consumer.
	Stage = pipeline.Stage
	// Listener hears about progress every ListenerInterval records.
	Listener = engine.Listener
	// Stats describe a run: records, elapsed and active time, ns per
	// record.
	Stats = engine.Stats
)

// Sink policies.
const (
	// Durable sinks slow the bridge down rather than lose records, and
	// acknowledgements wait for them.
	Durable = pipeline.Durable
	// BestEffort sinks never slow the bridge: when one falls behind, its
	// oldest batch is dropped and counted.
	BestEffort = pipeline.BestEffort
)

// Records and the contracts between the parts.
type (
	// Consumer receives batches; the batch belongs to the caller.
	Consumer = pipeline.Consumer
	// ConsumerFunc adapts a function to Consumer.
	ConsumerFunc = pipeline.ConsumerFunc
	// Sink is a Consumer that can be flushed and closed.
	Sink = pipeline.Sink
	// Batch is a group of records.
	Batch = record.Batch
	// Origin says where a batch came from: receiver, peer, host,
	// service, session.
	Origin = record.Origin
	// Record is one monitoring record: type, logging timestamp, values.
	Record = record.Record
	// Type is a record type; Field one of its fields; Value one value.
	Type  = record.Type
	Field = record.Field
	Value = record.Value
	// Catalog maps class names to record types.
	Catalog = record.Catalog
	// Metrics are the Prometheus metrics of a bridge.
	Metrics = metrics.Registry
)

// New returns an empty bridge.
func New(s Settings) *Bridge { return engine.New(s) }

// NewMetrics returns a metrics registry to put in Settings.Metrics; its
// Handler serves them.
func NewMetrics() *Metrics { return metrics.New() }

// BuiltinCatalog returns a catalogue of Kieker's record types.
func BuiltinCatalog() *Catalog { return record.Builtin() }

// TCPReceiverConfig configures a TCP receiver (mode, address, limits,
// reconnects); its NewDecoder is set by the constructors below.
type TCPReceiverConfig = tcp.Config

// TCPReceiver is a TCP receiver; its Addr reports the bound address.
type TCPReceiver = tcp.Receiver

// TCP receiver modes.
const (
	TCPServer       = tcp.Server
	TCPSingleServer = tcp.SingleServer
	TCPClient       = tcp.Client
)

// NewKiekerReceiver returns a receiver of Kieker's single-socket TCP
// protocol (Kieker's writers, its Python and C language packs). The zero
// Mode is a server.
func NewKiekerReceiver(cfg TCPReceiverConfig, logger *slog.Logger) (*TCPReceiver, error) {
	cfg.NewDecoder = tcp.KiekerDecoder(kieker.Options{Catalog: record.Builtin()})
	return tcp.New(cfg, tcp.Settings{Logger: logger})
}

// NewKDBReceiver returns a receiver of the KDB binary dialect with the
// mapping in mappingFile ("" for the default mapping of common Kieker
// types). The zero Mode is a server.
func NewKDBReceiver(cfg TCPReceiverConfig, mappingFile string, logger *slog.Logger) (*TCPReceiver, error) {
	m, err := mapping.Load(mappingFile, record.Builtin())
	if err != nil {
		return nil, err
	}
	cfg.NewDecoder = tcp.KDBDecoder(m, kdb.Options{})
	return tcp.New(cfg, tcp.Settings{Logger: logger})
}

// KiekerLogConfig configures a Kieker log directory sink (Kieker's
// FileWriter settings).
type KiekerLogConfig = logwrite.Config

// NewKiekerLog returns a sink writing a Kieker log directory under
// cfg.Path.
func NewKiekerLog(cfg KiekerLogConfig) (*logwrite.Writer, error) { return logwrite.New(cfg) }

// NewForward returns a sink sending records to another receiver:
// kieker-tcp://HOST:PORT or kdb-tcp://HOST:PORT (default mapping).
func NewForward(url string, logger *slog.Logger) (*forward.Sink, error) {
	return forward.New(forward.Config{URL: url}, forward.Settings{Logger: logger})
}

// Config is everything `tracebridge serve` can be told (the YAML file).
type Config = config.Config

// Server is a bridge built from a Config, with its receivers and sinks.
type Server = serve.Server

// LoadConfig reads a YAML configuration file.
func LoadConfig(path string) (*Config, error) { return config.Load(path) }

// DefaultConfig is serve's embedded default.
func DefaultConfig() *Config { return config.Default() }

// FromConfig builds everything cfg names; run it with Server.Run.
func FromConfig(cfg *Config, logger *slog.Logger, listener Listener, every int64) (*Server, error) {
	return serve.Build(cfg, serve.Settings{Logger: logger, Listener: listener, ListenerInterval: every})
}
