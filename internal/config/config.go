package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is everything a user sets for `tracebridge serve`: the receivers,
// the sinks, and the bridge's own settings. A YAML file (-c) holds one;
// KDB's command-line flags and Kieker's properties files map onto it.
type Config struct {
	// DataDir is where logs go unless a sink says otherwise
	// (default ./tracebridge-data).
	DataDir string `yaml:"data_dir"`
	// Metrics is the address of the Prometheus endpoint (e.g.
	// 127.0.0.1:9464); empty: none.
	Metrics string `yaml:"metrics"`
	// Libraries are IRL files or directories with more record types.
	Libraries []string `yaml:"libraries"`
	// QueueBatches bounds the batches waiting between receivers and sinks.
	QueueBatches int `yaml:"queue_batches"`
	// FlushInterval: how often sinks are flushed (default 1s).
	FlushInterval Duration `yaml:"flush_interval"`
	// ShutdownTimeout bounds draining on SIGTERM (default 30s).
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`

	// Split cuts huge traces into linked partial traces at these
	// component boundaries (package:N, regex:…, map:FILE) between the
	// receivers and the sinks.
	Split []string `yaml:"split"`

	Receivers []Receiver `yaml:"receivers"`
	Sinks     []Sink     `yaml:"sinks"`
}

// Receiver types.
const (
	TCPServer       = "tcp-server"        // KDB binary, many clients (alias kdb-tcp)
	TCPSingleServer = "tcp-single-server" // KDB binary, one connection; the bridge ends with it
	TCPClient       = "tcp-client"        // KDB binary, connects out
	KiekerTCP       = "kieker-tcp"        // Kieker's single-socket TCP, many clients
	KiekerTCPDual   = "kieker-tcp-dual"   // Kieker's dual-socket TCP (records + registry ports)
	StompClient     = "stomp-client"      // a STOMP broker (alias jms-client)
	BrokerEmbedded  = "broker-embedded"   // the embedded NATS/JetStream (+MQTT) broker (alias jms-embedded)
	NATSClient      = "nats-client"       // a NATS server (JetStream when available)
	MQTTClient      = "mqtt-client"       // an MQTT broker
)

// Sink types.
const (
	KiekerLog = "kieker-log"
	Forward   = "forward"
)

// Receiver configures one receiver.
type Receiver struct {
	// Name labels logs and metrics (default: the type, numbered if repeated).
	Name string `yaml:"name"`
	Type string `yaml:"type"`
	// Listen is host:port for servers; Connect is host:port for clients.
	Listen string `yaml:"listen"`
	// RegistryListen is the registry port of kieker-tcp-dual.
	RegistryListen string `yaml:"registry_listen"`
	Connect        string `yaml:"connect"`
	// Respawn makes a client reconnect with back-off.
	Respawn bool `yaml:"respawn"`
	// Format of a tcp-client's stream: kdb (default) or kieker.
	Format string `yaml:"format"`
	// Mapping is the KDB mapping file (id=class); empty: the default
	// mapping of common Kieker types.
	Mapping string `yaml:"mapping"`

	// Limits (0: defaults).
	MaxConnections int `yaml:"max_connections"`
	MaxStringLen   int `yaml:"max_string_len"`
	MaxRecordSize  int `yaml:"max_record_size"`
	MaxArrayLen    int `yaml:"max_array_len"`
	ReadBuffer     int `yaml:"read_buffer"`
	// DrainTimeout: at shutdown a connection is read until its peer has
	// sent nothing for this long (an idle timeout; default 1 s); the whole
	// drain is bounded by shutdown_timeout.
	DrainTimeout Duration `yaml:"drain_timeout"`

	// Brokers (stomp-client, nats-client, mqtt-client): the broker URL
	// (stomp://, stomp+ssl://, nats://, mqtt://, mqtts://) and credentials
	// (never logged). broker-embedded listens on Listen (NATS) and, if set,
	// MQTTListen.
	URL        string `yaml:"url"`
	User       string `yaml:"user"`
	Password   string `yaml:"password"`
	MQTTListen string `yaml:"mqtt_listen"`
	// Destination: the STOMP destination (default
	// /queue/kieker.tools.bridge), NATS subject (kieker.tools.bridge) or
	// MQTT topic (kieker/tools/bridge).
	Destination string `yaml:"destination"`
	// DeadLetter: where malformed messages are copied (same kind of name
	// as Destination); empty: nowhere (they are logged and acknowledged).
	DeadLetter string `yaml:"dead_letter"`
	// Encoding of message bodies: auto (default; text/* content types and
	// bodies starting with a digit are KDB text), text or binary.
	Encoding string `yaml:"encoding"`
	// Prefetch: unacknowledged messages the broker may send ahead (STOMP;
	// NATS: max ack pending; MQTT: the broker's in-flight window, 20 by
	// Mosquitto's default — a batch is handed on when it is reached).
	Prefetch int `yaml:"prefetch"`
	// VHost is the STOMP host header (RabbitMQ virtual host, default /).
	VHost string `yaml:"vhost"`
	// TLSCA is a PEM file of the certificate authorities trusted for
	// stomp+ssl:// (default: the system's).
	TLSCA string `yaml:"tls_ca"`
	// Stream and Durable name NATS JetStream's stream (KIEKER) and
	// consumer (tracebridge); ClientID MQTT's persistent session
	// (tracebridge).
	Stream   string `yaml:"stream"`
	Durable  string `yaml:"durable"`
	ClientID string `yaml:"client_id"`

	// JavaCharCount decodes registry entries of Kieker's Java writers,
	// which send UTF-16 char counts (non-ASCII strings otherwise fail).
	JavaCharCount bool `yaml:"java_char_count"`
	// TimestampUnit of the incoming timestamps: ns (default), us, ms or s;
	// other units are converted to nanoseconds (Kieker's C language pack
	// sends microseconds).
	TimestampUnit string `yaml:"timestamp_unit"`
}

// Sink configures one sink.
type Sink struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"`

	// kieker-log: the directory in which the log directory is created
	// (default: the properties file's customStoragePath, else DataDir),
	// ascii or binary (default binary), compression,
	// Kieker's rotation keys, names for the directory and metadata record.
	Path                string `yaml:"path"`
	Format              string `yaml:"format"`
	Compression         string `yaml:"compression"`
	MaxEntriesInFile    int    `yaml:"max_entries_in_file"`
	MaxLogSize          int    `yaml:"max_log_size"`
	MaxLogFiles         int    `yaml:"max_log_files"`
	BufferSize          int    `yaml:"buffer_size"`
	Hostname            string `yaml:"hostname"`
	ControllerName      string `yaml:"controller_name"`
	Metadata            *bool  `yaml:"metadata"`
	SetLoggingTimestamp bool   `yaml:"set_logging_timestamp"`
	FlushEachBatch      bool   `yaml:"flush"`
	// KiekerProperties is a kieker.monitoring.properties file whose
	// FileWriter keys configure this sink (applied first; the keys above
	// override it).
	KiekerProperties string `yaml:"kieker_properties"`

	// forward: kieker-tcp://host:port or kdb-tcp://host:port, and the KDB
	// mapping for kdb-tcp.
	URL     string `yaml:"url"`
	Mapping string `yaml:"mapping"`
}

// Duration is a time.Duration written as "1s", "250ms" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// Load reads a YAML configuration file. Unknown keys are errors (a typo
// must not silently fall back to a default).
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse parses a YAML configuration.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // an empty file is an empty configuration
		return nil, err
	}
	return &c, nil
}

// Default is the embedded default: a Kieker TCP receiver on
// 127.0.0.1:10133 (Kieker's writers and language packs connect to it), a
// KDB binary receiver on 127.0.0.1:10144 with the default mapping, and a
// binary Kieker log under ./tracebridge-data.
func Default() *Config {
	return &Config{
		Receivers: []Receiver{
			{Type: KiekerTCP, Listen: "127.0.0.1:10133"},
			{Type: TCPServer, Listen: "127.0.0.1:10144"},
		},
		Sinks: []Sink{{Type: KiekerLog}},
	}
}

// Normalize fills in defaults (data directory, names) and checks the
// configuration, returning every problem found.
func (c *Config) Normalize() error {
	if c.DataDir == "" {
		c.DataDir = "./tracebridge-data"
	}
	var errs []error
	if len(c.Receivers) == 0 {
		errs = append(errs, errors.New("no receivers"))
	}
	if len(c.Sinks) == 0 {
		errs = append(errs, errors.New("no sinks (a configuration file names its sinks; add `sinks: [{type: kieker-log}]` for a Kieker log under data_dir)"))
	}
	seen := map[string]bool{}
	name := func(n, typ string) string {
		if n == "" {
			n = typ
			for i := 2; seen[n]; i++ {
				n = fmt.Sprintf("%s-%d", typ, i)
			}
		}
		return n
	}
	for i := range c.Receivers {
		r := &c.Receivers[i]
		switch r.Type {
		case "kdb-tcp":
			r.Type = TCPServer
		case "jms-client":
			r.Type = StompClient
		case "jms-embedded":
			r.Type = BrokerEmbedded
		}
		r.Name = name(r.Name, r.Type)
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("receiver %s: name used twice", r.Name))
		}
		seen[r.Name] = true
		if err := r.check(); err != nil {
			errs = append(errs, fmt.Errorf("receiver %s: %w", r.Name, err))
		}
	}
	for i := range c.Sinks {
		s := &c.Sinks[i]
		s.Name = name(s.Name, s.Type)
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("sink %s: name used twice", s.Name))
		}
		seen[s.Name] = true
		if err := s.check(); err != nil {
			errs = append(errs, fmt.Errorf("sink %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (r *Receiver) check() error {
	switch r.Type {
	case TCPServer, TCPSingleServer, KiekerTCP:
		if r.Listen == "" {
			return errors.New("listen address missing")
		}
	case KiekerTCPDual:
		if r.Listen == "" || r.RegistryListen == "" {
			return errors.New("listen and registry_listen addresses are both needed")
		}
	case TCPClient:
		if r.Connect == "" {
			return errors.New("connect address missing")
		}
		if r.Format != "" && r.Format != "kdb" && r.Format != "kieker" {
			return fmt.Errorf("format %q: want kdb or kieker", r.Format)
		}
	case StompClient, NATSClient, MQTTClient:
		if r.URL == "" {
			return errors.New("url missing")
		}
	case BrokerEmbedded:
		if r.Listen == "" {
			return errors.New("listen address missing")
		}
	case "":
		return errors.New("type missing")
	default:
		return fmt.Errorf("unknown type %q (want %s, %s, %s, %s, %s, %s, %s, %s or %s)", r.Type,
			TCPServer, TCPSingleServer, TCPClient, KiekerTCP, KiekerTCPDual, StompClient, BrokerEmbedded, NATSClient, MQTTClient)
	}
	switch r.Encoding {
	case "", "auto", "text", "binary":
	default:
		return fmt.Errorf("encoding %q: want auto, text or binary", r.Encoding)
	}
	switch r.TimestampUnit {
	case "", "ns", "us", "ms", "s":
	default:
		return fmt.Errorf("timestamp_unit %q: want ns, us, ms or s", r.TimestampUnit)
	}
	return nil
}

func (s *Sink) check() error {
	switch s.Type {
	case KiekerLog:
		if s.Format != "" && s.Format != "ascii" && s.Format != "binary" {
			return fmt.Errorf("format %q: want ascii or binary", s.Format)
		}
	case Forward:
		if s.URL == "" {
			return errors.New("url missing (kieker-tcp://host:port or kdb-tcp://host:port)")
		}
	case "":
		return errors.New("type missing")
	default:
		return fmt.Errorf("unknown type %q (want %s or %s)", s.Type, KiekerLog, Forward)
	}
	return nil
}
