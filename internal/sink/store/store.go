// Package store is the sink that keeps every assembled trace in the
// embedded trace store (internal/store): the engine assembles traces from
// the records it hands on and gives them to this sink (it takes traces of
// every source); records themselves are not stored. Flush syncs the store,
// so whatever a flush covered survives a kill -9, and acknowledgements
// (ZICO's OK, brokers' acks) wait for it. The store asks the bridge's
// host table (internal/hostdb, pipeline.Shared.HostDB; the sink opens one
// in <data_dir>/hosts when the bridge has none) for each host's bounds and
// whether its traces are dropped, and tells it who sent traces. The host
// records of a store written before the host table moved out of it are
// carried into the table when the sink opens the store.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	tstore "github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Type is the sink type this package builds.
const Type = "store"

// DefaultHeadSize is the size at which a head is cut into a block unless
// head_size says otherwise (the store's own default), or the memory
// target (else the limit) allows less.
const DefaultHeadSize = 32 << 20

// DefaultCacheSize is the store's read cache unless cache_size says
// otherwise (the store's own default), or the memory target (else the
// limit) allows less.
const DefaultCacheSize = 256 << 20

// Config is the YAML configuration of a store sink.
type Config struct {
	// Path is the store's directory (default <data_dir>/store).
	Path string `yaml:"path"`
	// SyncInterval: the store is synced at least this often (default
	// 1s); every flush of the bridge syncs it too.
	SyncInterval pipeline.Duration `yaml:"sync_interval"`
	// MaxAge and MaxSize bound the whole store (0: unbounded); hosts have
	// bounds of their own (tracebridge hosts set).
	MaxAge  pipeline.Duration `yaml:"max_age"`
	MaxSize pipeline.ByteSize `yaml:"max_size"`
	// Backend is where the blocks live: "local" (the default: under
	// Path) or "s3" (the bucket of S3; the write-ahead area stays under
	// Path).
	Backend string            `yaml:"backend"`
	S3      objstore.S3Config `yaml:"s3"`
	// HeadSize and HeadAge: a host's newest traces are cut into a block
	// when they reach this size (32MiB, or an eighth of the Go runtime's
	// share of memory_target, else of memory_limit, when that is less;
	// the largest head is cut when the heads' indexes in memory reach it
	// together) or age (5m).
	HeadSize pipeline.ByteSize `yaml:"head_size"`
	HeadAge  pipeline.Duration `yaml:"head_age"`
	// MaxWAL bounds the write-ahead area (1GiB): past it (uploads behind)
	// the receivers are back-pressured; they are too when the cut heads
	// waiting for their uploads keep twice HeadSize of index in memory.
	MaxWAL pipeline.ByteSize `yaml:"max_wal"`
	// CompactBelow and CompactTo: blocks smaller than CompactBelow
	// (HeadSize/2) are merged into blocks of up to CompactTo (4 ×
	// HeadSize) after each retention run.
	CompactBelow pipeline.ByteSize `yaml:"compact_below"`
	CompactTo    pipeline.ByteSize `yaml:"compact_to"`
	// CacheSize bounds what is kept of blocks for reading (256MiB, or a
	// quarter of the Go runtime's share of memory_target, else of
	// memory_limit, when that is less).
	CacheSize pipeline.ByteSize `yaml:"cache_size"`
	// RetentionInterval: how often retention and compaction run
	// (default 1m).
	RetentionInterval pipeline.Duration `yaml:"retention_interval"`
	// SegmentSize and SegmentAge are the names of HeadSize and HeadAge
	// in stores of version 1 (still read).
	SegmentSize pipeline.ByteSize `yaml:"segment_size"`
	SegmentAge  pipeline.Duration `yaml:"segment_age"`

	// Node and MayCompact are set by a cluster node, not in YAML
	// (store.Options): the node's name, with which the store shares its
	// bucket with the other nodes' stores (it lists their blocks in the
	// background), and the compaction lease (nil: always).
	Node       string      `yaml:"-"`
	MayCompact func() bool `yaml:"-"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	for _, v := range []int64{int64(c.SyncInterval), int64(c.MaxAge), int64(c.MaxSize), int64(c.HeadSize), int64(c.HeadAge), int64(c.MaxWAL),
		int64(c.CompactBelow), int64(c.CompactTo), int64(c.CacheSize), int64(c.RetentionInterval), int64(c.SegmentSize), int64(c.SegmentAge)} {
		if v < 0 {
			return errors.New("intervals and sizes must not be negative")
		}
	}
	switch c.Backend {
	case "", objstore.BackendLocal:
	case objstore.BackendS3:
		if err := c.S3.Validate(); err != nil {
			return fmt.Errorf("s3: %w", err)
		}
	default:
		return fmt.Errorf("backend %q: want %q or %q", c.Backend, objstore.BackendLocal, objstore.BackendS3)
	}
	return nil
}

// Factory returns the factory of store sinks (durable by default:
// acknowledgements wait for the store).
func Factory() pipeline.SinkFactory {
	return pipeline.NewSinkFactory(Type, pipeline.Durable, func() *Config { return &Config{} },
		func(c *Config, set pipeline.Settings) (pipeline.BuiltSink, error) { return New(c, set) })
}

// Sink keeps traces in a store.
type Sink struct {
	st   *tstore.Store
	own  *hostdb.DB // the host table the sink opened (none in Shared)
	log  *slog.Logger
	name string

	mu     sync.Mutex
	dirty  bool
	closed bool

	stop chan struct{}
	done chan struct{}

	syncFaults lograte.Limiter // the timer's failed syncs (a full disk fails every one)
}

var (
	_ pipeline.Sink          = (*Sink)(nil)
	_ pipeline.TraceConsumer = (*Sink)(nil)
	_ pipeline.TracesOnly    = (*Sink)(nil)

	_ pipeline.PackedTraceConsumer = (*Sink)(nil)
)

// New opens the store and starts its sync and retention timer.
func New(c *Config, set pipeline.Settings) (*Sink, error) {
	path := c.Path
	if path == "" {
		path = filepath.Join(set.DataDir, "store")
	}
	hosts := set.Shared.HostDB()
	var own *hostdb.DB
	if hosts == nil {
		var err error
		// The bridge's data directory; without one (a program embedding
		// the sink), beside the store.
		dataDir := set.DataDir
		if dataDir == "" {
			dataDir = filepath.Dir(filepath.Clean(path))
		}
		if own, err = hostdb.Open(filepath.Join(dataDir, "hosts"), hostdb.Options{Logger: set.Logger}); err != nil {
			return nil, pipeline.Classify(pipeline.ErrConfig, err)
		}
		hosts = own
		set.Shared.SetHostDB(own)
	}
	var bucket objstore.Store
	if c.Backend == objstore.BackendS3 {
		var err error
		if bucket, err = objstore.NewS3(c.S3); err != nil {
			if own != nil {
				own.Close()
			}
			return nil, pipeline.Classify(pipeline.ErrConfig, err)
		}
	}
	headSize, headAge := int64(c.HeadSize), time.Duration(c.HeadAge)
	if headSize == 0 {
		headSize = int64(c.SegmentSize)
	}
	if headAge == 0 {
		headAge = time.Duration(c.SegmentAge)
	}
	cache := int64(c.CacheSize)
	if b := set.Shared.Memory().Budget(); b > 0 {
		// Within the memory target (or limit): the read cache and the
		// heads (a cut encodes a head in memory; compaction merges
		// blocks of up to four heads) take a share of it unless
		// configured.
		if cache == 0 {
			cache = min(DefaultCacheSize, b/4)
		}
		if headSize == 0 {
			headSize = min(DefaultHeadSize, b/8)
		}
	}
	st, err := tstore.Open(path, tstore.Options{
		Bucket: bucket, MaxAge: time.Duration(c.MaxAge), MaxSize: int64(c.MaxSize),
		HeadSize: headSize, HeadAge: headAge, MaxWAL: int64(c.MaxWAL),
		CompactBelow: int64(c.CompactBelow), CompactTo: int64(c.CompactTo), CacheSize: cache,
		Logger: set.Logger, Hosts: hostTable{hosts}, Node: c.Node, MayCompact: c.MayCompact,
	})
	if err == nil {
		err = migrate(st, hosts, set.Logger)
		if err != nil {
			st.Close()
		}
	}
	if err != nil {
		if own != nil {
			own.Close()
		}
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	if rec := st.Recovery(); len(rec.Truncated) > 0 { // else the store said it
		set.Logger.Warn("trace store recovered", "sink", set.Name, "traces", rec.Traces, "truncated", rec.Truncated)
	}
	s := &Sink{st: st, own: own, log: set.Logger, name: set.Name, stop: make(chan struct{}), done: make(chan struct{}),
		syncFaults: lograte.Limiter{PerSecond: 1}}
	sync := time.Duration(c.SyncInterval)
	if sync <= 0 {
		sync = time.Second
	}
	ret := time.Duration(c.RetentionInterval)
	if ret <= 0 {
		ret = time.Minute
	}
	go s.timer(sync, ret)
	return s, nil
}

// Store returns the store (for the HTTP API of the same bridge).
func (s *Sink) Store() *tstore.Store { return s.st }

// Where says where the store is.
func (s *Sink) Where() string {
	if b, ok := s.st.Bucket().(fmt.Stringer); ok && !isLocal(s.st.Bucket()) {
		return "storing traces in " + b.String() + " (write-ahead in " + s.st.Dir() + ")"
	}
	return "storing traces in " + s.st.Dir()
}

func isLocal(b objstore.Store) bool {
	_, ok := b.(*objstore.Local)
	return ok
}

func (s *Sink) timer(sync, ret time.Duration) {
	defer close(s.done)
	st := time.NewTicker(sync)
	rt := time.NewTicker(ret)
	defer st.Stop()
	defer rt.Stop()
	s.maintain()
	for {
		select {
		case <-s.stop:
			return
		case <-st.C:
			// Sync even when nothing arrived: it cuts the heads that
			// reached their age into blocks.
			err := s.Flush()
			if err == nil {
				err = s.st.Sync()
			}
			if err != nil {
				s.syncFaults.Log(context.Background(), s.log, slog.LevelError, "trace store sync failed", "sink", s.name, "err", err)
			}
		case <-rt.C:
			s.maintain()
		}
	}
}

// maintain runs retention, then compaction (whole blocks; ingest goes on
// meanwhile).
func (s *Sink) maintain() {
	if _, err := s.st.Retain(); err != nil && !errors.Is(err, tstore.ErrClosed) {
		s.log.Error("trace store retention failed", "sink", s.name, "err", err)
	}
	if _, err := s.st.Compact(); err != nil && !errors.Is(err, tstore.ErrClosed) {
		s.log.Error("trace store compaction failed", "sink", s.name, "err", err)
	}
}

// Consume ignores records: the store keeps the traces assembled from them.
func (s *Sink) Consume(context.Context, *record.Batch) error { return nil }

// TracesOnly: the engine need not queue records for the store.
func (s *Sink) TracesOnly() bool { return true }

// PackedTraces: the store encodes each trace once (store.Append reads a
// packed one through its trace.Unpacker).
func (s *Sink) PackedTraces() bool { return true }

// TraceSources: every trace.
func (s *Sink) TraceSources() trace.Sources { return trace.AllSources }

// ConsumeTraces appends traces to the store; they are durable after the
// next Flush.
func (s *Sink) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	if _, err := s.st.Append(ts); err != nil {
		return fmt.Errorf("trace store %s: %w", s.st.Dir(), err)
	}
	s.mu.Lock()
	s.dirty = true
	s.mu.Unlock()
	return nil
}

// Flush syncs the store.
func (s *Sink) Flush() error {
	s.mu.Lock()
	dirty := s.dirty
	s.dirty = false
	s.mu.Unlock()
	if !dirty {
		return nil
	}
	if err := s.st.Sync(); err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return fmt.Errorf("trace store %s: %w", s.st.Dir(), err)
	}
	return nil
}

// Close syncs and closes the store. It is safe to call twice.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	err := s.st.Close()
	if s.own != nil {
		err = errors.Join(err, s.own.Close())
	}
	return err
}

// hostTable is the host table as the store asks it.
type hostTable struct{ db *hostdb.DB }

var _ tstore.HostTable = hostTable{}

func (t hostTable) Policy(name string) tstore.HostPolicy { return tstore.HostPolicy(t.db.Policy(name)) }
func (t hostTable) Contact(name string, at time.Time)    { t.db.Contact(name, at) }

// migrate carries the host records of a store written before the host
// table moved out of it into the table (a host the table has already
// stays as it is), then reduces them in the store to what it keeps of a
// partition. A crash in between imports them again, to the same effect.
func migrate(st *tstore.Store, hosts *hostdb.DB, log *slog.Logger) error {
	legacy := st.LegacyHosts()
	if len(legacy) == 0 {
		return nil
	}
	n, err := hosts.Import(legacy)
	if err != nil {
		return fmt.Errorf("store %s: carrying its host records into the host table %s: %w", st.Dir(), hosts.Dir(), err)
	}
	if err := st.DropLegacyHosts(); err != nil {
		return err
	}
	log.Info("host records carried from the trace store into the host table", "store", st.Dir(), "hosts", hosts.Dir(), "records", len(legacy), "added", n)
	return nil
}
