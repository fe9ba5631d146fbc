// Package natsd owns the bridge's embedded NATS server with JetStream
// (and optionally MQTT): the broker of the broker-embedded receiver and
// the repository of the live stream. A bridge runs at most one: Acquire
// starts it on first use and shares it through pipeline.Shared, Release
// stops it when its last user is done.
//
// Concurrency: a Server is safe for concurrent use; Acquire and Release
// may be called from any goroutine.
package natsd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/lograte"
)

// Config configures the embedded server.
type Config struct {
	// Host to listen on (default 127.0.0.1: loopback only).
	Host string
	// Port for NATS clients (0: a free port).
	Port int
	// MQTTPort, if positive (or 0 with MQTT set), also listens for MQTT
	// clients; MQTT topic a/b/c is NATS subject a.b.c.
	MQTT     bool
	MQTTPort int
	// StoreDir holds JetStream's files, so that what was published while
	// the bridge was stopped is there when it starts again.
	StoreDir string
	// CredentialsFile holds the credential every client must present
	// (created on first start: see Credentials); empty:
	// CredentialsFile(the parent of StoreDir), the data directory's.
	CredentialsFile string
	// TLS, if set, makes NATS and MQTT clients connecting over the
	// network speak TLS (in-process clients need not).
	TLS *tls.Config
	// Logger hears the server's warnings and errors (rate-limited), such as
	// messages it had to drop; nil discards them.
	Logger *slog.Logger

	// Cluster, when set, makes the server one of a NATS cluster with
	// clustered JetStream (a tracebridge cluster's node, internal/cluster).
	Cluster *ClusterConfig
}

// ClusterConfig makes an embedded server one node of a NATS cluster: its
// name (unique in the cluster: JetStream's Raft groups know servers by
// it), the route listener and the other servers' routes.
type ClusterConfig struct {
	// ServerName is this server's name; Name the cluster's.
	ServerName, Name string
	// Host and Port of the route listener.
	Host string
	Port int
	// Routes are the other servers' route addresses (host:port or
	// nats-route://host:port).
	Routes []string
}

// SplitListen splits a listen address (HOST:PORT) into Config's Host and
// Port.
func SplitListen(addr string) (host string, port int, err error) {
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

// Limits on what the server buffers before a stream has stored it. NATS's
// defaults (100,000 messages, 128 MiB) drop messages from fast core-NATS
// publishers silently; publishers that need at-least-once delivery publish
// through JetStream and wait for its acknowledgement.
const (
	maxBufferedMsgs  = 2_000_000
	maxBufferedBytes = 512 << 20
)

// Server is the embedded broker: a NATS server with JetStream.
type Server struct {
	ns       *server.Server
	host     string
	port     int
	addr     string
	mqttPort int // 0: no MQTT
	creds    Credentials
	tls      bool
	once     sync.Once
}

// Start starts an embedded server and waits until it accepts
// connections. Bridges share theirs with Acquire.
func Start(cfg Config) (*Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded broker: no storage directory")
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	if cfg.CredentialsFile == "" {
		cfg.CredentialsFile = CredentialsFile(filepath.Dir(filepath.Clean(cfg.StoreDir)))
	}
	creds, err := ensureCredentials(cfg.CredentialsFile)
	if err != nil {
		return nil, fmt.Errorf("embedded broker: credentials: %w", err)
	}
	// A port in use would only show as a timeout of the server's start.
	for _, p := range []int{cfg.Port, cfg.MQTTPort} {
		if p <= 0 || (p == cfg.MQTTPort && !cfg.MQTT) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(p)))
		if err != nil {
			return nil, fmt.Errorf("embedded broker: %w", err)
		}
		ln.Close()
	}
	port := cfg.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "tracebridge",
		Host:       cfg.Host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		// Publishers that send faster than the stream stores.
		StreamMaxBufferedMsgs: maxBufferedMsgs,
		StreamMaxBufferedSize: maxBufferedBytes,
		// Publishers that send big batches of records per message.
		MaxPayload: 8 << 20,
		// Every client authenticates (the stream serves every record).
		Username:  creds.User,
		Password:  creds.Password,
		TLSConfig: cfg.TLS,
	}
	if cfg.MQTT {
		mqttPort := cfg.MQTTPort
		if mqttPort == 0 {
			mqttPort = server.RANDOM_PORT // the port it picked is read below
		}
		opts.MQTT = server.MQTTOpts{Host: cfg.Host, Port: mqttPort, TLSConfig: cfg.TLS}
	}
	if c := cfg.Cluster; c != nil {
		if err := clusterOptions(opts, c); err != nil {
			return nil, fmt.Errorf("embedded broker: %w", err)
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	if cfg.Logger != nil {
		ns.SetLoggerV2(newServerLog(cfg.Logger), false, false, false)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		ns.WaitForShutdown()
		what := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
		if cfg.MQTT && cfg.MQTTPort > 0 {
			what += " and MQTT " + net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.MQTTPort))
		}
		return nil, fmt.Errorf("embedded broker: cannot listen on %s (port in use?)", what)
	}
	a := ns.Addr().(*net.TCPAddr)
	if cfg.MQTT && cfg.MQTTPort == 0 {
		// The server writes the MQTT port it picked into its options,
		// which only its variables show (ready means it listens).
		v, err := ns.Varz(nil)
		if err != nil || v.MQTT.Port <= 0 {
			ns.Shutdown()
			ns.WaitForShutdown()
			return nil, fmt.Errorf("embedded broker: the MQTT port it picked is unknown (%v)", err)
		}
		cfg.MQTTPort = v.MQTT.Port
	}
	// Validation let plain text off loopback only with insecure: true.
	listenpolicy.Warn(cfg.Logger, "embedded NATS server", a.String(), cfg.TLS != nil)
	if cfg.MQTT {
		listenpolicy.Warn(cfg.Logger, "embedded NATS server (MQTT)", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.MQTTPort)), cfg.TLS != nil)
	}
	return &Server{ns: ns, host: cfg.Host, port: a.Port, addr: a.String(), mqttPort: cfg.MQTTPort, creds: creds, tls: cfg.TLS != nil}, nil
}

// clusterOptions sets the route listener and routes of opts.
func clusterOptions(opts *server.Options, c *ClusterConfig) error {
	opts.ServerName = c.ServerName
	opts.Cluster.Name = c.Name
	opts.Cluster.Host = c.Host
	opts.Cluster.Port = c.Port
	for _, r := range c.Routes {
		if !strings.Contains(r, "://") {
			r = "nats-route://" + r
		}
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("route %q: %w", r, err)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return nil
}

// Credentials are what every client of the server presents (NATS user
// and password; an MQTT client's username and password).
func (s *Server) Credentials() Credentials { return s.creds }

// TLS reports whether network clients speak TLS.
func (s *Server) TLS() bool { return s.tls }

// Addr is the address NATS clients connect to.
func (s *Server) Addr() string { return s.addr }

// MQTTAddr is the address MQTT clients connect to ("" without MQTT).
func (s *Server) MQTTAddr() string {
	if s.mqttPort <= 0 {
		return ""
	}
	return net.JoinHostPort(s.host, strconv.Itoa(s.mqttPort))
}

// StorageMax is the disk JetStream may use on this server (NATS sets it
// to 75 % of the store directory's free disk at start), 0 when unknown.
func (s *Server) StorageMax() int64 {
	if c := s.ns.JetStreamConfig(); c != nil {
		return c.MaxStore
	}
	return 0
}

// InProcess lets the receiver connect without a socket.
func (s *Server) InProcess() *server.Server { return s.ns }

// Shutdown stops the broker; JetStream's files stay. Safe to call twice.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	})
}

// SubscriberIPs returns the addresses of the client connections with
// interest in subject (a request's reply subject names its requester);
// an in-process connection has the address "".
func (s *Server) SubscriberIPs(subject string) ([]string, error) {
	cz, err := s.ns.Connz(&server.ConnzOptions{Username: true, Account: server.DEFAULT_GLOBAL_ACCOUNT, FilterSubject: subject})
	if err != nil {
		return nil, err
	}
	ips := make([]string, 0, len(cz.Conns))
	for _, c := range cz.Conns {
		ips = append(ips, c.IP)
	}
	return ips, nil
}

// serverLog passes the embedded server's warnings and errors to slog, at
// most serverLogPerSecond a second (a flood of drops is summarised by the
// "suppressed" attribute of the next line), and drops its notices, debug
// and trace lines. The server calls it from many goroutines.
type serverLog struct {
	log   *slog.Logger
	limit lograte.Limiter
}

const serverLogPerSecond = 5

func newServerLog(log *slog.Logger) *serverLog {
	return &serverLog{log: log, limit: lograte.Limiter{PerSecond: serverLogPerSecond}}
}

func (l *serverLog) emit(level slog.Level, format string, v []any) {
	l.limit.Log(context.Background(), l.log, level, fmt.Sprintf(format, v...), "component", "embedded-broker")
}

func (l *serverLog) Noticef(string, ...any) {}
func (l *serverLog) Debugf(string, ...any)  {}
func (l *serverLog) Tracef(string, ...any)  {}
func (l *serverLog) Warnf(format string, v ...any) {
	// The server's one password is the bridge's own random credential,
	// which its clients read in plain text from the credentials file: a
	// hash in the server's options would protect nothing, and the
	// warning at every start would only alarm.
	if strings.HasPrefix(format, "Plaintext passwords detected") {
		return
	}
	l.emit(slog.LevelWarn, format, v)
}

func (l *serverLog) Errorf(format string, v ...any) {
	// A cluster route to a server that is down is tried again every
	// second: its first failure is the event, the others are noise.
	if strings.HasPrefix(format, "Error trying to connect to route") && len(v) > 0 && fmt.Sprint(v[0]) != "1" {
		return
	}
	l.emit(slog.LevelError, format, v)
}
func (l *serverLog) Fatalf(format string, v ...any) { l.emit(slog.LevelError, format, v) }
