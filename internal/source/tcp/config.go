package tcp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Mode selects how a Receiver gets its connections.
type Mode int

// The modes (see the package comment).
const (
	Server       Mode = iota // listen, many clients (KDB tcp-server)
	SingleServer             // listen, exactly one client (KDB tcp-single-server)
	Client                   // connect out (KDB tcp-client)
	Dual                     // Kieker's dual-socket protocol: records and registry on two listeners
)

var modeNames = [...]string{Server: "server", SingleServer: "single-server", Client: "client", Dual: "dual"}

// String returns the mode's name as ParseMode accepts it.
func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// ParseMode maps a name to a Mode: server, single-server, client, dual, or
// KDB's names tcp-server, tcp-single-server, tcp-client.
func ParseMode(name string) (Mode, error) {
	switch name {
	case "server", "tcp-server":
		return Server, nil
	case "single-server", "tcp-single-server":
		return SingleServer, nil
	case "client", "tcp-client":
		return Client, nil
	case "dual", "kieker-tcp-dual":
		return Dual, nil
	}
	return 0, fmt.Errorf("%w: unknown tcp mode %q (server, single-server, client or dual)", ErrConfig, name)
}

// Defaults of Config.
const (
	DefaultName           = "tcp"
	DefaultMaxConnections = 1024
	DefaultReadBuffer     = 64 << 10
	DefaultDrainTimeout   = time.Second
	DefaultRegistryWait   = 5 * time.Second
	DefaultDialTimeout    = 5 * time.Second
	DefaultBackoffMin     = 100 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
	DefaultLogRate        = 10
)

// Sentinel errors.
var (
	// ErrConfig: the configuration is invalid (KDB exit code 2).
	ErrConfig = errors.New("invalid tcp configuration")
	// ErrListen: a listener could not be bound (KDB exit code 3,
	// communication).
	ErrListen = errors.New("cannot listen on")
	// ErrConnect: a Client without Respawn could not connect (KDB exit
	// code 3, communication).
	ErrConnect = errors.New("cannot connect to")
)

// Config is the user's configuration of a Receiver. Zero values select the
// defaults.
type Config struct {
	// Name identifies the receiver in logs (key receiver); DefaultName when
	// empty. Metrics carry the name of Settings.Metrics.
	Name string
	// Mode selects server, single-server, client or dual.
	Mode Mode
	// Address is host:port to listen on (Server, SingleServer, Dual's
	// records) or to connect to (Client). Port 0 listens on a free port.
	Address string
	// RegistryAddress is the host:port Dual listens on for registry
	// connections.
	RegistryAddress string
	// TLS, if set, makes the listeners speak TLS.
	TLS *tls.Config

	// NewDecoder makes the decoder of each connection (all modes but Dual):
	// KiekerDecoder, KDBDecoder or the caller's own. It carries the limits.
	NewDecoder func() Decoder
	// Kieker configures Dual's decoders: Catalog, MaxStringLen,
	// MaxArrayLen, MaxRegistryEntries and MaxRegistryBytes (of the one
	// shared registry) and JavaCharCount. Strings, Inline and DualSocket are set by the receiver.
	Kieker kieker.Options

	// Transform, if set, is applied to the records each decode call added
	// (b.Records[from:]) before the batch is handed on; it may change
	// values in place. It is called concurrently for different connections.
	Transform func(b *record.Batch, from int)

	// MaxConnections limits the open connections of a Server or Dual
	// receiver (both kinds together); one over the limit is closed at once.
	MaxConnections int
	// ReadBuffer is the size of a connection's read buffer in bytes. It
	// grows while a single unit is larger, up to the decoder's MaxUnit.
	ReadBuffer int
	// DrainTimeout is the idle timeout of a connection while the receiver
	// drains after Run's context is cancelled: a connection whose peer has
	// sent nothing for that long is closed (default 1 s). It is renewed
	// before every read, so a slow consumer does not cut the drain short;
	// it does not bound the drain as a whole (see the package comment).
	DrainTimeout time.Duration
	// RegistryWait bounds how long a Dual records connection waits for a
	// string id the registry connections have not delivered; then the
	// frame is a decode error.
	RegistryWait time.Duration

	// Respawn makes a Client reconnect whenever its connection fails or
	// ends, waiting BackoffMin, doubling up to BackoffMax, back to
	// BackoffMin after a successful connect.
	Respawn    bool
	BackoffMin time.Duration
	BackoffMax time.Duration
	// DialTimeout bounds one connect of a Client.
	DialTimeout time.Duration

	// LogRate is the number of fault lines (decode errors, rejected
	// connections, …) logged per second before further ones are only
	// counted.
	LogRate int
}

// Settings are injected dependencies of a Receiver.
type Settings struct {
	// Logger hears about connection faults (rate-limited) and, at debug
	// level, connections opening and closing; nil discards.
	Logger *slog.Logger
	// Metrics counts bytes, records, decode errors and connections; nil
	// counts nothing.
	Metrics *metrics.Receiver
	// Memory is the process's memory limit: near it the connections stop
	// reading (TCP back-pressure) until it takes data again; nil: none.
	Memory pipeline.Memory
}

// withDefaults returns c with defaults filled in, or an error wrapping
// ErrConfig.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Mode < Server || c.Mode > Dual {
		return c, fmt.Errorf("%w: %s", ErrConfig, c.Mode)
	}
	if c.Address == "" {
		return c, fmt.Errorf("%w: receiver %s: no address", ErrConfig, c.Name)
	}
	if c.Mode == Dual {
		if c.RegistryAddress == "" {
			return c, fmt.Errorf("%w: receiver %s: dual mode needs a registry address", ErrConfig, c.Name)
		}
	} else if c.NewDecoder == nil {
		return c, fmt.Errorf("%w: receiver %s: no decoder", ErrConfig, c.Name)
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.ReadBuffer <= 0 {
		c.ReadBuffer = DefaultReadBuffer
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.RegistryWait <= 0 {
		c.RegistryWait = DefaultRegistryWait
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.LogRate <= 0 {
		c.LogRate = DefaultLogRate
	}
	return c, nil
}
