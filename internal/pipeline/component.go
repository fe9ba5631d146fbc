package pipeline

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Error classes of building a component, matching the Kieker Data
// Bridge's exit codes: a mapping file (1), the configuration (2),
// communication (3). Constructors wrap one of them.
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

// Classify marks err as being of class (ErrMapping, ErrConfig or ErrComm);
// nil stays nil, and an error that already has a class keeps it.
func Classify(class, err error) error {
	if err == nil || errors.Is(err, ErrMapping) || errors.Is(err, ErrConfig) || errors.Is(err, ErrComm) {
		return err
	}
	return classified{class, err}
}

// Settings are what every component is given besides its own
// configuration.
type Settings struct {
	// Name is the component's name in logs and metrics.
	Name string
	// Logger is never nil (a discarding logger at least).
	Logger *slog.Logger
	// Metrics may be nil (its handles are nil-safe).
	Metrics *metrics.Registry
	// DataDir is where components keep files unless told otherwise.
	DataDir string
	// Catalog holds the record types (built-in and IRL); shared, read-only
	// once the pipeline runs.
	Catalog *record.Catalog
	// Shared holds what the bridge's components share (the host table);
	// it may be nil.
	Shared *Shared
	// Policy is the delivery policy the engine applies to a sink (the
	// factory's, or the configuration's `policy:`); a sink that retries
	// or drops by itself follows it: durable never drops, best-effort
	// never holds the pipeline up. Receivers and stages ignore it.
	Policy Policy
	// Frames says that nothing changes records between the receivers and
	// the sinks (the pipeline has no stages) and that a sink writes an
	// encoding a receiver may decode from (FramesTaker), so a receiver may
	// keep the bytes its records were decoded from beside them
	// (record.Frames) for that sink to copy. Only receivers read it;
	// serve sets it.
	Frames bool
	// FramesOnly, set with Frames, says more: that no consumer reads the
	// values of records of the types for which it returns true (every
	// sink copies frames, nothing else takes records of those types), so
	// a receiver may hand such records on as frames alone, without
	// decoding their values (record.Frames.Only). Only receivers read it;
	// serve sets it.
	FramesOnly func(t *record.Type) bool
}

// FramesTaker is implemented by the configuration of a sink that copies
// the frames receivers keep (record.Frames: the binary Kieker log copies
// Kieker frames) instead of encoding the records' values again.
type FramesTaker interface {
	TakesFrames() bool
}

// FramesOnlyTaker is implemented by the configuration of a sink that
// writes batches of frames only (record.Frames.Only) as it writes the
// records they stand for: ReadsValues names the types whose values it
// still reads (records it handles otherwise), which receivers then
// decode.
type FramesOnlyTaker interface {
	FramesTaker
	ReadsValues(t *record.Type) bool
}

// Config is a component's own configuration. Factories return a pointer to
// a struct with defaults filled in; the YAML node is decoded into it (a key
// the struct does not know is an error naming the key and the component),
// then Validate checks it.
type Config interface {
	Validate() error
}

// Receiver is a source built by a factory.
type Receiver interface {
	Source
	// Where says for people where the receiver listens, connects or
	// consumes ("listening on 127.0.0.1:10133").
	Where() string
	// Close releases what the constructor acquired (bound ports, started
	// servers) when Run is not going to run; after Run it is a no-op. It
	// is safe to call twice.
	Close() error
}

// BuiltSink is a sink built by a factory.
type BuiltSink interface {
	Sink
	// Where says for people where the sink writes or sends.
	Where() string
}

// ReceiverFactory builds one type of receiver.
type ReceiverFactory interface {
	// Type is the name in YAML (`type: kieker-tcp`) and on the command
	// line (-t).
	Type() string
	// Aliases are other names of the type (KDB's jms-client …).
	Aliases() []string
	// NewConfig returns a configuration with the defaults.
	NewConfig() Config
	// NewReceiver builds a receiver; listeners are bound here, so a port
	// in use fails before anything runs.
	NewReceiver(cfg Config, set Settings) (Receiver, error)
}

// StageFactory builds one type of stage.
type StageFactory interface {
	Type() string
	NewConfig() Config
	NewStage(cfg Config, set Settings) (Stage, error)
}

// SinkFactory builds one type of sink.
type SinkFactory interface {
	Type() string
	// Policy is the delivery policy of the type's sinks unless the
	// configuration says otherwise.
	Policy() Policy
	NewConfig() Config
	NewSink(cfg Config, set Settings) (BuiltSink, error)
}

// Policy is how the engine treats a sink that cannot keep up.
type Policy uint8

const (
	// Durable sinks apply back-pressure: when a durable sink's queue is
	// full the pipeline waits, slowing the sources. Acknowledgements to
	// brokers and clients wait for every durable sink.
	Durable Policy = iota
	// BestEffort sinks never slow the pipeline: when a best-effort sink's
	// queue is full its oldest batch is dropped and counted.
	// Acknowledgements do not wait for it.
	BestEffort
)

// String returns the policy's YAML name.
func (p Policy) String() string {
	if p == BestEffort {
		return "best-effort"
	}
	return "durable"
}

// ParsePolicy maps a YAML name to a Policy.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "durable":
		return Durable, nil
	case "best-effort":
		return BestEffort, nil
	}
	return 0, fmt.Errorf("policy %q: want durable or best-effort", s)
}

// Duration is a time.Duration written as "1s", "250ms" in YAML (Go's
// syntax), or "7d" for days.
type Duration time.Duration

// UnmarshalText parses a Go duration string, or a whole number of days
// with the suffix d.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration in Go's syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// ParseDuration is time.ParseDuration that also accepts days ("7d", "1d12h").
func ParseDuration(s string) (time.Duration, error) {
	if i := strings.IndexByte(s, 'd'); i > 0 {
		var days int64
		if _, err := fmt.Sscanf(s[:i], "%d", &days); err == nil && fmt.Sprint(days) == s[:i] {
			rest := time.Duration(0)
			if i+1 < len(s) {
				r, err := time.ParseDuration(s[i+1:])
				if err != nil {
					return 0, err
				}
				rest = r
			}
			return time.Duration(days)*24*time.Hour + rest, nil
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want e.g. 250ms, 1s, 5m or 7d", s)
	}
	return v, nil
}

// Factories is the set of component types a bridge can build.
type Factories struct {
	Receivers []ReceiverFactory
	Stages    []StageFactory
	Sinks     []SinkFactory
}

// Receiver returns the factory of a receiver type (or alias), or nil.
func (f *Factories) Receiver(typ string) ReceiverFactory {
	for _, r := range f.Receivers {
		if r.Type() == typ {
			return r
		}
		for _, a := range r.Aliases() {
			if a == typ {
				return r
			}
		}
	}
	return nil
}

// Stage returns the factory of a stage type, or nil.
func (f *Factories) Stage(typ string) StageFactory {
	for _, s := range f.Stages {
		if s.Type() == typ {
			return s
		}
	}
	return nil
}

// Sink returns the factory of a sink type, or nil.
func (f *Factories) Sink(typ string) SinkFactory {
	for _, s := range f.Sinks {
		if s.Type() == typ {
			return s
		}
	}
	return nil
}

// ReceiverTypes, StageTypes and SinkTypes list the type names, for
// messages.
func (f *Factories) ReceiverTypes() []string {
	var out []string
	for _, r := range f.Receivers {
		out = append(out, r.Type())
	}
	return out
}

// StageTypes lists the stage type names.
func (f *Factories) StageTypes() []string {
	var out []string
	for _, s := range f.Stages {
		out = append(out, s.Type())
	}
	return out
}

// SinkTypes lists the sink type names.
func (f *Factories) SinkTypes() []string {
	var out []string
	for _, s := range f.Sinks {
		out = append(out, s.Type())
	}
	return out
}

// NewReceiverFactory returns a ReceiverFactory for a configuration type C
// (a pointer to a struct): def returns the defaults, create builds the
// receiver.
func NewReceiverFactory[C Config](typ string, def func() C, create func(C, Settings) (Receiver, error), aliases ...string) ReceiverFactory {
	return receiverFactory[C]{typ, aliases, def, create}
}

type receiverFactory[C Config] struct {
	typ     string
	aliases []string
	def     func() C
	create  func(C, Settings) (Receiver, error)
}

func (f receiverFactory[C]) Type() string      { return f.typ }
func (f receiverFactory[C]) Aliases() []string { return f.aliases }
func (f receiverFactory[C]) NewConfig() Config { return f.def() }
func (f receiverFactory[C]) NewReceiver(cfg Config, set Settings) (Receiver, error) {
	c, ok := cfg.(C)
	if !ok {
		return nil, Classify(ErrConfig, fmt.Errorf("receiver type %s: configuration of type %T", f.typ, cfg))
	}
	return f.create(c, set.withDefaults())
}

// NewStageFactory returns a StageFactory for a configuration type C.
func NewStageFactory[C Config](typ string, def func() C, create func(C, Settings) (Stage, error)) StageFactory {
	return stageFactory[C]{typ, def, create}
}

type stageFactory[C Config] struct {
	typ    string
	def    func() C
	create func(C, Settings) (Stage, error)
}

func (f stageFactory[C]) Type() string      { return f.typ }
func (f stageFactory[C]) NewConfig() Config { return f.def() }
func (f stageFactory[C]) NewStage(cfg Config, set Settings) (Stage, error) {
	c, ok := cfg.(C)
	if !ok {
		return nil, Classify(ErrConfig, fmt.Errorf("stage type %s: configuration of type %T", f.typ, cfg))
	}
	return f.create(c, set.withDefaults())
}

// NewSinkFactory returns a SinkFactory for a configuration type C.
func NewSinkFactory[C Config](typ string, policy Policy, def func() C, create func(C, Settings) (BuiltSink, error)) SinkFactory {
	return sinkFactory[C]{typ, policy, def, create}
}

type sinkFactory[C Config] struct {
	typ    string
	policy Policy
	def    func() C
	create func(C, Settings) (BuiltSink, error)
}

func (f sinkFactory[C]) Type() string      { return f.typ }
func (f sinkFactory[C]) Policy() Policy    { return f.policy }
func (f sinkFactory[C]) NewConfig() Config { return f.def() }
func (f sinkFactory[C]) NewSink(cfg Config, set Settings) (BuiltSink, error) {
	c, ok := cfg.(C)
	if !ok {
		return nil, Classify(ErrConfig, fmt.Errorf("sink type %s: configuration of type %T", f.typ, cfg))
	}
	return f.create(c, set.withDefaults())
}

func (s Settings) withDefaults() Settings {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Catalog == nil {
		s.Catalog = record.Builtin()
	}
	return s
}

// ByteSize is a size in bytes written as 2GiB, 500MB or 1048576 in YAML.
type ByteSize int64

// UnmarshalText parses a size (ParseByteSize).
func (b *ByteSize) UnmarshalText(t []byte) error {
	n, err := ParseByteSize(string(t))
	if err != nil {
		return err
	}
	*b = ByteSize(n)
	return nil
}

// String writes b in the largest unit that holds it exactly (2GiB,
// 500MB, 1536KiB, 100B; powers of 1024 before powers of 1000 of about the
// same size), so a size a user gave comes back as it was given.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"TB", 1e12}, {"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3}} {
		if b != 0 && int64(b)%u.size == 0 {
			return strconv.FormatInt(int64(b)/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// ParseByteSize parses a number of bytes with an optional unit: B, KB, MB,
// GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024).
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want e.g. 500MB or 2GiB", s)
	}
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TIB": 1 << 40}[strings.ToUpper(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (B, KB, MB, GB, KiB, MiB, GiB, …)", s, unit)
	}
	return int64(f * mult), nil
}
