package tcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/mapping"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/timeunit"
)

// The receiver types this package builds.
const (
	TypeServer       = "tcp-server"        // KDB binary, many clients (alias kdb-tcp)
	TypeSingleServer = "tcp-single-server" // KDB binary, one connection; the bridge ends with it
	TypeClient       = "tcp-client"        // KDB binary or Kieker, connects out
	TypeKieker       = "kieker-tcp"        // Kieker's single-socket TCP, many clients
	TypeKiekerDual   = "kieker-tcp-dual"   // Kieker's dual-socket TCP (records + registry ports)
)

// Limits are the keys every TCP receiver takes besides its address: the
// per-connection limits (0: the defaults) and the unit of the incoming
// timestamps.
type Limits struct {
	// MaxConnections (1024), MaxStringLen (1 MiB for Kieker, 64 KiB for
	// KDB), MaxRecordSize (KDB, 1 MiB), MaxArrayLen (65536), ReadBuffer
	// (64 KiB).
	MaxConnections int `yaml:"max_connections"`
	MaxStringLen   int `yaml:"max_string_len"`
	MaxRecordSize  int `yaml:"max_record_size"`
	MaxArrayLen    int `yaml:"max_array_len"`
	ReadBuffer     int `yaml:"read_buffer"`
	// DrainTimeout: at shutdown a connection is read until its peer has
	// sent nothing for this long (an idle timeout; default 1 s).
	DrainTimeout pipeline.Duration `yaml:"drain_timeout"`
	// TimestampUnit of the incoming timestamps: ns (default), us, ms or s;
	// other units are converted to nanoseconds (Kieker's C language pack
	// sends microseconds).
	TimestampUnit string `yaml:"timestamp_unit"`
	// TLS: a certificate and key make a listening receiver speak TLS.
	TLS pipeline.TLSFiles `yaml:"tls"`
	// Insecure lets a listening receiver take plain text off loopback
	// (internal/listenpolicy); it says so at start-up.
	Insecure bool `yaml:"insecure"`
}

// checkListen applies the listener policy to the address of key.
func (l *Limits) checkListen(key, addr string) error {
	return listenpolicy.Check(key, addr, l.TLS.Enabled(), l.Insecure, "tls: {cert, key}")
}

func (l *Limits) validate() error {
	if err := l.TLS.Validate(); err != nil {
		return err
	}
	if _, err := timeunit.Factor(l.TimestampUnit); err != nil {
		return fmt.Errorf("timestamp_unit: %w", err)
	}
	if l.MaxConnections < 0 || l.MaxStringLen < 0 || l.MaxRecordSize < 0 || l.MaxArrayLen < 0 || l.ReadBuffer < 0 {
		return errors.New("limits must not be negative")
	}
	return nil
}

// KDBServerConfig configures tcp-server and tcp-single-server.
type KDBServerConfig struct {
	// Listen is host:port (port 0 picks a free one).
	Listen string `yaml:"listen"`
	// Mapping is the KDB mapping file (id=class); empty: the default
	// mapping of common Kieker types.
	Mapping string `yaml:"mapping"`
	Limits  `yaml:",inline"`
}

// Validate checks the configuration.
func (c *KDBServerConfig) Validate() error {
	if c.Listen == "" {
		return errors.New("listen address missing")
	}
	if err := c.validate(); err != nil {
		return err
	}
	return c.checkListen("listen", c.Listen)
}

// ClientConfig configures tcp-client.
type ClientConfig struct {
	// Connect is host:port.
	Connect string `yaml:"connect"`
	// Respawn makes the client reconnect with back-off.
	Respawn bool `yaml:"respawn"`
	// Format of the stream: kdb (default) or kieker.
	Format        string `yaml:"format"`
	Mapping       string `yaml:"mapping"`
	JavaCharCount bool   `yaml:"java_char_count"`
	// MaxRegistryBytes bounds the string bytes of a kieker stream's
	// registry (see KiekerConfig).
	MaxRegistryBytes int `yaml:"max_registry_bytes"`
	Limits           `yaml:",inline"`
}

// Validate checks the configuration.
func (c *ClientConfig) Validate() error {
	if c.Connect == "" {
		return errors.New("connect address missing")
	}
	if c.MaxRegistryBytes < 0 {
		return errors.New("max_registry_bytes must not be negative")
	}
	if c.Format != "" && c.Format != "kdb" && c.Format != "kieker" {
		return fmt.Errorf("format %q: want kdb or kieker", c.Format)
	}
	return c.validate()
}

// KiekerConfig configures kieker-tcp.
type KiekerConfig struct {
	Listen string `yaml:"listen"`
	// JavaCharCount decodes registry entries of Kieker's Java writers,
	// which send UTF-16 char counts (non-ASCII strings otherwise fail).
	JavaCharCount bool `yaml:"java_char_count"`
	// MaxRegistryBytes bounds the bytes of the strings one connection
	// registers (kieker.DefaultMaxRegistryBytes, 16 MiB, when 0); the
	// connection that would pass it is closed with a logged error.
	MaxRegistryBytes int `yaml:"max_registry_bytes"`
	Limits           `yaml:",inline"`
}

// Validate checks the configuration.
func (c *KiekerConfig) Validate() error {
	if c.Listen == "" {
		return errors.New("listen address missing")
	}
	if c.MaxRegistryBytes < 0 {
		return errors.New("max_registry_bytes must not be negative")
	}
	if err := c.validate(); err != nil {
		return err
	}
	return c.checkListen("listen", c.Listen)
}

// DualConfig configures kieker-tcp-dual.
type DualConfig struct {
	Listen         string `yaml:"listen"`
	RegistryListen string `yaml:"registry_listen"`
	JavaCharCount  bool   `yaml:"java_char_count"`
	// MaxRegistryBytes bounds the bytes of the strings in the registry
	// that all connections share (16 MiB when 0); the registry connection
	// that would pass it is closed with a logged error.
	MaxRegistryBytes int `yaml:"max_registry_bytes"`
	Limits           `yaml:",inline"`
}

// Validate checks the configuration.
func (c *DualConfig) Validate() error {
	if c.Listen == "" || c.RegistryListen == "" {
		return errors.New("listen and registry_listen addresses are both needed")
	}
	if c.MaxRegistryBytes < 0 {
		return errors.New("max_registry_bytes must not be negative")
	}
	if err := c.validate(); err != nil {
		return err
	}
	if err := c.checkListen("listen", c.Listen); err != nil {
		return err
	}
	return c.checkListen("registry_listen", c.RegistryListen)
}

// Factories returns the factories of the TCP receiver types.
func Factories() []pipeline.ReceiverFactory {
	return []pipeline.ReceiverFactory{
		pipeline.NewReceiverFactory(TypeServer, func() *KDBServerConfig { return &KDBServerConfig{} },
			func(c *KDBServerConfig, set pipeline.Settings) (pipeline.Receiver, error) {
				return build(set, Config{Mode: Server, Address: c.Listen}, c.Limits, loadKDB(c.Mapping, c.Limits, set))
			}, "kdb-tcp"),
		pipeline.NewReceiverFactory(TypeSingleServer, func() *KDBServerConfig { return &KDBServerConfig{} },
			func(c *KDBServerConfig, set pipeline.Settings) (pipeline.Receiver, error) {
				return build(set, Config{Mode: SingleServer, Address: c.Listen}, c.Limits, loadKDB(c.Mapping, c.Limits, set))
			}),
		pipeline.NewReceiverFactory(TypeClient, func() *ClientConfig { return &ClientConfig{} },
			func(c *ClientConfig, set pipeline.Settings) (pipeline.Receiver, error) {
				dec := loadKDB(c.Mapping, c.Limits, set)
				if c.Format == "kieker" {
					dec = func() (func() Decoder, error) {
						return KiekerDecoder(kiekerOptions(c.Limits, c.JavaCharCount, c.MaxRegistryBytes, set)), nil
					}
				}
				return build(set, Config{Mode: Client, Address: c.Connect, Respawn: c.Respawn}, c.Limits, dec)
			}),
		pipeline.NewReceiverFactory(TypeKieker, func() *KiekerConfig { return &KiekerConfig{} },
			func(c *KiekerConfig, set pipeline.Settings) (pipeline.Receiver, error) {
				dec := func() (func() Decoder, error) {
					return KiekerDecoder(kiekerOptions(c.Limits, c.JavaCharCount, c.MaxRegistryBytes, set)), nil
				}
				return build(set, Config{Mode: Server, Address: c.Listen}, c.Limits, dec)
			}),
		pipeline.NewReceiverFactory(TypeKiekerDual, func() *DualConfig { return &DualConfig{} },
			func(c *DualConfig, set pipeline.Settings) (pipeline.Receiver, error) {
				return build(set, Config{Mode: Dual, Address: c.Listen, RegistryAddress: c.RegistryListen, Kieker: kiekerOptions(c.Limits, c.JavaCharCount, c.MaxRegistryBytes, set)}, c.Limits, nil)
			}),
	}
}

// kiekerOptions are the decoders' options. They keep the frames of the
// records (for the binary Kieker log to copy) when the pipeline changes no
// records (set.Frames) and neither does the receiver (timestamps in ns),
// and keep records of the types no consumer reads as frames only
// (set.FramesOnly).
func kiekerOptions(l Limits, javaCharCount bool, maxRegistryBytes int, set pipeline.Settings) kieker.Options {
	f, err := timeunit.Factor(l.TimestampUnit)
	o := kieker.Options{Catalog: set.Catalog, MaxStringLen: l.MaxStringLen, MaxArrayLen: l.MaxArrayLen, MaxRegistryBytes: maxRegistryBytes, JavaCharCount: javaCharCount,
		KeepFrames: set.Frames && err == nil && f == 1}
	if o.KeepFrames {
		o.FramesOnly = set.FramesOnly
	}
	return o
}

func loadKDB(mappingFile string, l Limits, set pipeline.Settings) func() (func() Decoder, error) {
	return func() (func() Decoder, error) {
		m, err := mapping.Load(mappingFile, set.Catalog)
		if err != nil {
			return nil, err
		}
		return KDBDecoder(m, kdb.Options{MaxStringLen: l.MaxStringLen, MaxArrayLen: l.MaxArrayLen, MaxRecordSize: l.MaxRecordSize}), nil
	}
}

// built is a Receiver as a pipeline component.
type built struct {
	*Receiver
	where string
}

func (b *built) Where() string { return b.where }

// build makes a receiver from cfg (mode, addresses) and the limits; dec
// loads the decoder (nil for Dual, whose decoders come from cfg.Kieker).
func build(set pipeline.Settings, cfg Config, l Limits, dec func() (func() Decoder, error)) (pipeline.Receiver, error) {
	cfg.Name = set.Name
	cfg.MaxConnections = l.MaxConnections
	cfg.ReadBuffer = l.ReadBuffer
	cfg.DrainTimeout = time.Duration(l.DrainTimeout)
	if cfg.Mode == Client && (l.TLS.Enabled() || l.Insecure) {
		return nil, pipeline.Classify(pipeline.ErrConfig, errors.New("tls, insecure: a tcp-client connects out; tls and insecure are for listening receivers"))
	}
	tc, err := l.TLS.ServerConfig()
	if err != nil {
		return nil, err
	}
	cfg.TLS = tc
	if dec != nil {
		nd, err := dec()
		if err != nil {
			return nil, err
		}
		cfg.NewDecoder = nd
	}
	conv, err := timeunit.New(l.TimestampUnit, set.Catalog)
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	if conv != nil {
		cfg.Transform = conv.Apply
	}
	r, err := New(cfg, Settings{Logger: set.Logger, Metrics: set.Metrics.Receiver(set.Name), Memory: set.Shared.Memory()})
	if err != nil {
		class := pipeline.ErrConfig
		if errors.Is(err, ErrListen) {
			class = pipeline.ErrComm
		}
		return nil, pipeline.Classify(class, err)
	}
	where := "connecting to " + cfg.Address
	if a := r.Addr(); a != nil {
		where = "listening on " + a.String()
		listenpolicy.Warn(set.Logger, "receiver "+set.Name, a.String(), tc != nil)
	}
	if a := r.RegistryAddr(); a != nil {
		where += " (registry " + a.String() + ")"
		listenpolicy.Warn(set.Logger, "receiver "+set.Name+" (registry)", a.String(), tc != nil)
	}
	if tc != nil {
		where += " (TLS)"
	}
	return &built{Receiver: r, where: where}, nil
}

// Run runs the receiver; a client that cannot connect is a communication
// error.
func (b *built) Run(ctx context.Context, out pipeline.Consumer) error {
	err := b.Receiver.Run(ctx, out)
	if errors.Is(err, ErrConnect) {
		return pipeline.Classify(pipeline.ErrComm, err)
	}
	return err
}
