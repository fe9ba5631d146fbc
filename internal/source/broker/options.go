package broker

import (
	"errors"
	"fmt"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/mapping"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/timeunit"
)

// Options are the keys every broker receiver takes in YAML besides its
// broker's address.
type Options struct {
	// User and Password: credentials (never logged).
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// Destination: the STOMP destination (default
	// /queue/kieker.tools.bridge), NATS subject (kieker.tools.bridge) or
	// MQTT topic (kieker/tools/bridge).
	Destination string `yaml:"destination"`
	// DeadLetter: a broker destination of the same kind (e.g.
	// /queue/kieker.dead for STOMP) where malformed messages are copied;
	// empty: nowhere (they are logged, counted and acknowledged).
	DeadLetter string `yaml:"dead_letter"`
	// Prefetch: unacknowledged messages the broker may send ahead (STOMP;
	// NATS: max ack pending; MQTT: the broker's in-flight window).
	Prefetch int `yaml:"prefetch"`
	// Mapping is the KDB mapping file (id=class); empty: the default
	// mapping of common Kieker types.
	Mapping string `yaml:"mapping"`
	// Encoding of message bodies: auto (default; text/* content types and
	// bodies starting with a digit are KDB text), text or binary.
	Encoding string `yaml:"encoding"`
	// Limits of the KDB decoders (0: defaults).
	MaxStringLen  int `yaml:"max_string_len"`
	MaxRecordSize int `yaml:"max_record_size"`
	MaxArrayLen   int `yaml:"max_array_len"`
	// TimestampUnit of the incoming timestamps: ns (default), us, ms or s.
	TimestampUnit string `yaml:"timestamp_unit"`
}

// ValidateClient checks the options of a client of the broker at url;
// form shows what a URL looks like when it is missing.
func (o *Options) ValidateClient(url, form string) error {
	if url == "" {
		return fmt.Errorf("url missing (%s)", form)
	}
	return o.Validate()
}

// Validate checks the options.
func (o *Options) Validate() error {
	if _, err := ParseFormat(o.Encoding); err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	if _, err := timeunit.Factor(o.TimestampUnit); err != nil {
		return fmt.Errorf("timestamp_unit: %w", err)
	}
	if o.Prefetch < 0 || o.MaxStringLen < 0 || o.MaxRecordSize < 0 || o.MaxArrayLen < 0 {
		return errors.New("prefetch and limits must not be negative")
	}
	return nil
}

// Batch returns the Batcher configuration the options describe: the
// mapping file loaded, the decoders' limits, the timestamp conversion.
func (o *Options) Batch(set pipeline.Settings) (Config, error) {
	m, err := mapping.Load(o.Mapping, set.Catalog)
	if err != nil {
		return Config{}, err
	}
	enc, err := ParseFormat(o.Encoding)
	if err != nil {
		return Config{}, pipeline.Classify(pipeline.ErrConfig, err)
	}
	c := Config{
		Name:    set.Name,
		Mapping: m,
		Options: kdb.Options{MaxStringLen: o.MaxStringLen, MaxArrayLen: o.MaxArrayLen, MaxRecordSize: o.MaxRecordSize},
		Format:  enc,
	}
	conv, err := timeunit.New(o.TimestampUnit, set.Catalog)
	if err != nil {
		return Config{}, pipeline.Classify(pipeline.ErrConfig, err)
	}
	if conv != nil {
		c.Transform = conv.Apply
	}
	return c, nil
}

// Settings returns the injected settings of a broker receiver.
func SettingsOf(set pipeline.Settings) Settings {
	return Settings{Logger: set.Logger, Metrics: set.Metrics.Receiver(set.Name), Memory: set.Shared.Memory()}
}

// Target is a broker receiver: it consumes from a target it can name.
type Target interface {
	pipeline.Source
	Target() string
}

// Consuming makes r a pipeline.Receiver "consuming from" its target, with
// nothing to close before Run.
func Consuming(r Target) pipeline.Receiver { return consuming{r} }

type consuming struct{ Target }

func (c consuming) Where() string { return "consuming from " + c.Target.Target() }
func (c consuming) Close() error  { return nil }
