package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/daemon"
	"github.com/tracebridge/tracebridge/internal/serve"
	streamsink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/internal/web"
)

const serveSynopsis = `serve [-c tracebridge.yaml] [-t TYPE -p PORT [-h HOST] [-m MAPPING] [--respawn]]
                  [-L PATHS] [-k kieker.monitoring.properties] [--data-dir DIR] [-v N] [-s] [-d]
                  [--metrics HOST:PORT] [--http HOST:PORT|off] [--stream HOST:PORT|nats://…|off]
                  [--split SPEC…]

Without -c or -t, serve runs the embedded default: a Kieker TCP receiver on
127.0.0.1:10133, a KDB binary receiver on 127.0.0.1:10144 (default mapping),
OTLP on 127.0.0.1:4317 (gRPC) and 127.0.0.1:4318 (HTTP), ZICO (zorka agents)
on 127.0.0.1:8640, a binary Kieker log and the trace store under
./tracebridge-data, the HTTP API on 127.0.0.1:16686 (docs/API.md) and the
live stream on the embedded NATS server at 127.0.0.1:14222 (tracebridge tail).

Receiver types (-t): tcp-server, tcp-single-server, tcp-client (the KDB binary
dialect), kieker-tcp (Kieker's single-socket TCP), kieker-tcp-dual,
stomp-client (alias jms-client; -l stomp://HOST:61613 -u USER -w PASS),
broker-embedded (alias jms-embedded; -p 4222 [--mqtt-port 1883]),
nats-client (-l nats://HOST:4222), mqtt-client (-l mqtt://HOST:1883),
otlp (OTLP/gRPC on 4317 and OTLP/HTTP on 4318), otlp-grpc, otlp-http,
zico (zorka agents; default port 8640),
jfr (--repository DIR [-h HOST]: follow the JFR repository of running JVMs).

Exit codes: 1 mapping file, 2 configuration, 3 communication, 4 command line.`

// serveFlags are KDB's command line plus tracebridge's own.
type serveFlags struct {
	configFile, typ, host, mapping, kiekerProps, dataDir, metrics, pidFile, logFile string
	stream                                                                          string
	url, user, password, destination, deadLetter, encoding, repository              string
	port, registryPort, mqttPort, verbose                                           int
	libs                                                                            listFlag
	split                                                                           repeatFlag
	stats, daemon, respawn, help, noStore, security                                 bool

	http string // --http: the HTTP API's address, or off
}

// serveFlagSet defines serve's options, KDB's under a short and a long
// name each.
func serveFlagSet(stderr io.Writer) (*flag.FlagSet, *serveFlags, *options) {
	fs := newFlags("serve", serveSynopsis, stderr)
	f := &serveFlags{}
	o := &options{fs: fs, synopsis: serveSynopsis}
	fs.Usage = func() { o.usage(stderr) }
	o.str(&f.configFile, "c", "config", "FILE", "", "YAML configuration with receivers and sinks")
	o.str(&f.typ, "t", "type", "TYPE", "", "receiver type: tcp-server, tcp-single-server, tcp-client, kieker-tcp, kieker-tcp-dual, stomp-client, broker-embedded, nats-client, mqtt-client, otlp, otlp-grpc, otlp-http, zico, jfr")
	o.str(&f.host, "h", "host", "HOST", "", "host to connect to (tcp-client) or listen on (servers and broker-embedded; default 127.0.0.1); jfr: the monitored host's name (default this machine's)")
	o.int(&f.port, "p", "port", "PORT", -1, "port to listen on (servers: required, 0 picks a free one; broker-embedded: default 4222; otlp-grpc 4317, otlp-http 4318, zico 8640) or connect to (tcp-client)")
	o.int(&f.registryPort, "", "registry-port", "PORT", -1, "registry port of kieker-tcp-dual (required with it)")
	o.str(&f.url, "l", "url", "URL", "", "broker URL: stomp://HOST:61613, stomp+ssl://HOST:61614, nats://HOST:4222, mqtt://HOST:1883")
	o.str(&f.user, "u", "user", "USER", "", "broker user name")
	o.str(&f.password, "w", "password", "PASSWORD", "", "broker password (never logged)")
	o.str(&f.destination, "", "destination", "NAME", "", "STOMP destination, NATS subject or MQTT topic (default /queue/kieker.tools.bridge, kieker.tools.bridge, kieker/tools/bridge)")
	o.str(&f.deadLetter, "", "dead-letter", "DESTINATION", "", "broker destination receiving a copy of each malformed message: a STOMP destination (/queue/NAME), NATS subject or MQTT topic; not a file path")
	o.str(&f.encoding, "", "encoding", "auto|text|binary", "", "broker message bodies (default auto: text/* content types and bodies starting with a digit are text)")
	o.int(&f.mqttPort, "", "mqtt-port", "PORT", -1, "broker-embedded: also listen for MQTT clients on this port (default: no MQTT)")
	o.str(&f.repository, "", "repository", "DIR", "", "jfr: the JVMs' repository (-XX:FlightRecorderOptions:repository=DIR); it may appear later")
	o.str(&f.mapping, "m", "map", "FILE", "", "KDB mapping file of id=class lines (default: ids for common Kieker types)")
	o.value(&f.libs, "L", "libraries", "PATHS", "IRL files or directories with more record types (repeatable, or ':'-separated)")
	o.str(&f.kiekerProps, "k", "kieker", "FILE", "", "kieker.monitoring.properties configuring the Kieker log")
	o.int(&f.verbose, "v", "verbose", "N", 0, "print 'received <count> records' every N records (default: never)")
	o.bool(&f.stats, "s", "stats", "print the active time (first to last record), ns per record and records per second at the end")
	o.bool(&f.daemon, "d", "daemon", "detach from the console; write a PID file")
	o.bool(&f.respawn, "", "respawn", "tcp-client: reconnect with back-off when the connection fails")
	o.bool(&f.security, "", "security", "zico, otlp: only hosts of the store's host table may send (tracebridge hosts add), with their secret (a ZICO HELLO's, an OTLP bearer token)")
	o.value(&f.split, "", "split", "SPEC", "cut traces at component boundaries: package:N, regex:P…, map:FILE (repeatable)")
	o.str(&f.dataDir, "", "data-dir", "DIR", "", "directory for logs and the trace store (default ./tracebridge-data)")
	o.bool(&f.noStore, "", "no-store", "do not keep traces in the trace store (DATA-DIR/store)")
	o.str(&f.stream, "", "stream", "HOST:PORT|URL|off", "", "the live stream: the embedded NATS server's address, an external server (nats://HOST:PORT), or off (default: the embedded default's 127.0.0.1:14222, a YAML file's stream: section, none with -t)")
	o.str(&f.metrics, "", "metrics", "HOST:PORT", "", "serve Prometheus metrics on HOST:PORT")
	o.str(&f.http, "", "http", "HOST:PORT", "", "serve the HTTP API, Jaeger's query API and the web UI on HOST:PORT (off: none)")
	o.str(&f.pidFile, "", "pid-file", "FILE", "tracebridge.pid", "PID file written with -d")
	o.str(&f.logFile, "", "log-file", "FILE", "tracebridge.log", "where a daemon (-d) writes its output")
	o.bool(&f.help, "", "help", "show this help (so does -h alone)")
	return fs, f, o
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f, opts := serveFlagSet(stderr)
	// -h is KDB's host flag; alone it asks for help, as for every command.
	if len(args) == 1 && args[0] == "-h" {
		opts.usage(stdout)
		return nil
	}
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) || err == nil && f.help {
		opts.usage(stdout)
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("serve: unexpected arguments %v", pos)
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	if f.daemon && !daemon.IsChild() {
		pid, err := daemon.Start(append([]string{"serve"}, args...), f.pidFile, f.logFile)
		var ee *daemon.ExitError
		if errors.As(err, &ee) {
			return withCode(ee.Code, err)
		}
		if err != nil {
			return withCode(exitConfig, err)
		}
		fmt.Fprintf(stdout, "tracebridge: daemon started, pid %d (PID file %s, output in %s)\n", pid, f.pidFile, f.logFile)
		return nil
	}

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	streamsink.Version = version
	set := serve.Settings{Logger: logger, Version: version, UI: web.Handler()}
	if f.verbose > 0 {
		set.ListenerInterval = int64(f.verbose)
		set.Listener = func(count int64, msg string) {
			if msg == "" {
				fmt.Fprintf(stdout, "received %d records\n", count)
			}
		}
	}
	srv, err := serve.Build(cfg, set)
	if err != nil {
		return serveError(err)
	}
	for _, r := range srv.Receivers {
		fmt.Fprintf(stdout, "tracebridge: receiver %s (%s) %s\n", r.Name, r.Type, r.Where)
	}
	for _, s := range srv.Sinks {
		note := ""
		if s.Policy != "durable" {
			note = " (" + s.Policy + ")"
		}
		fmt.Fprintf(stdout, "tracebridge: sink %s (%s) %s%s\n", s.Name, s.Type, s.Where, note)
	}
	if srv.MetricsAddr != "" {
		fmt.Fprintf(stdout, "tracebridge: metrics on http://%s/metrics\n", srv.MetricsAddr)
	}
	if srv.HTTPAddr != "" {
		fmt.Fprintf(stdout, "tracebridge: http on %s://%s/ (API /api/v1, Jaeger /api)\n", srv.HTTPScheme, srv.HTTPAddr)
	}
	fmt.Fprintln(stdout, "tracebridge: ready")
	if daemon.IsChild() {
		if err := daemon.WritePIDFile(f.pidFile); err != nil {
			srv.Close()
			return withCode(exitConfig, err)
		}
		defer daemon.RemovePIDFile(f.pidFile)
	}
	runErr := srv.Run(ctx)
	if f.stats {
		st := srv.Engine.Stats()
		// KDB's performance statistic, over the time records flowed
		// (first to last), not the idle time around it.
		fmt.Fprintf(stdout, "tracebridge: %d records in %.3f s active (first to last record; run time %.3f s), %.1f ns per record, %.0f records per second\n",
			st.Records, st.Active.Seconds(), st.Elapsed.Seconds(), st.NanosPerRecord(), st.RecordsPerSecond())
	}
	return serveError(runErr)
}

// serveError maps the serve package's error classes to KDB's exit codes.
func serveError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, serve.ErrMapping):
		return withCode(exitMapping, err)
	case errors.Is(err, serve.ErrComm):
		return withCode(exitComm, err)
	}
	return withCode(exitConfig, err)
}

// config builds the configuration the flags describe: a YAML file (-c),
// one receiver and one log described by KDB's flags (-t …), or the
// embedded default.
func (f *serveFlags) config() (*config.Config, error) {
	var cfg *config.Config
	kdbFlags := f.typ != "" || f.port >= 0 || f.host != "" || f.mapping != "" || f.respawn || f.registryPort >= 0 ||
		f.url != "" || f.user != "" || f.password != "" || f.destination != "" || f.deadLetter != "" || f.encoding != "" || f.mqttPort >= 0 || f.security ||
		f.repository != ""
	switch {
	case f.configFile != "" && kdbFlags:
		return nil, usagef("serve: -c and the receiver flags (-t, -p, -h, -m, -l, -u, -w, --respawn, …) exclude each other")
	case f.configFile != "":
		c, err := config.Load(f.configFile)
		if err != nil {
			return nil, withCode(exitConfig, err)
		}
		cfg = c
		if f.kiekerProps != "" {
			for i := range cfg.Sinks {
				if cfg.Sinks[i].Type == "kieker-log" && !cfg.Sinks[i].Has("kieker_properties") {
					cfg.Sinks[i].Set("kieker_properties", f.kiekerProps)
				}
			}
		}
	case kdbFlags:
		if f.typ == "" {
			return nil, usagef("serve: the receiver flags (-p, -h, -m, -l, …) need -t TYPE")
		}
		rs, err := f.receivers()
		if err != nil {
			return nil, err
		}
		cfg = &config.Config{
			Receivers: rs,
			Sinks:     []config.Component{config.NewComponent("kieker-log", map[string]any{"kieker_properties": f.kiekerProps}), config.NewComponent("store", nil)},
		}
	default:
		cfg = config.Default()
		cfg.Sinks[0].Set("kieker_properties", f.kiekerProps)
	}
	if f.noStore {
		cfg.Sinks = slices.DeleteFunc(cfg.Sinks, func(c config.Component) bool { return c.Type == "store" })
	}
	switch {
	case f.stream == "":
	case f.stream == "off":
		cfg.Stream = nil
	default:
		var c config.Component
		if cfg.Stream != nil {
			c = *cfg.Stream
		}
		key, other := "listen", "url"
		if strings.Contains(f.stream, "://") {
			key, other = "url", "listen"
		}
		c.Delete(other)
		c.Set(key, f.stream)
		cfg.Stream = &c
	}
	if f.dataDir != "" {
		cfg.DataDir = f.dataDir
	}
	if f.metrics != "" {
		cfg.Metrics = f.metrics
	}
	switch f.http {
	case "":
	case "off":
		cfg.HTTP = config.HTTP{}
	default:
		cfg.HTTP.Listen = f.http
	}
	cfg.Libraries = append(cfg.Libraries, f.libs...)
	cfg.Split = append(cfg.Split, f.split...)
	return cfg, nil
}

// receivers describes the receivers of KDB's command line: one, or the
// two OTLP receivers of -t otlp.
func (f *serveFlags) receivers() ([]config.Component, error) {
	if f.repository != "" && f.typ != "jfr" {
		return nil, usagef("serve: --repository is for -t jfr")
	}
	host := f.host
	if host == "" {
		host = "127.0.0.1"
	}
	listen := func(port int) string {
		if f.port >= 0 {
			port = f.port
		}
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	switch f.typ {
	case "otlp", "otlp-grpc", "otlp-http", "zico":
		if f.mapping != "" || f.url != "" || f.respawn || f.registryPort >= 0 || f.mqttPort >= 0 || f.user != "" ||
			f.password != "" || f.destination != "" || f.deadLetter != "" || f.encoding != "" {
			return nil, usagef("serve: -t %s takes -p, -h and --security only", f.typ)
		}
		keys := func(port int) map[string]any {
			return map[string]any{"listen": listen(port), "security": f.security}
		}
		switch f.typ {
		case "otlp":
			if f.port >= 0 {
				return nil, usagef("serve: -t otlp listens on 4317 (gRPC) and 4318 (HTTP); for another port use -t otlp-grpc or -t otlp-http with -p")
			}
			return []config.Component{config.NewComponent("otlp-grpc", keys(4317)), config.NewComponent("otlp-http", keys(4318))}, nil
		case "otlp-grpc":
			return []config.Component{config.NewComponent(f.typ, keys(4317))}, nil
		case "otlp-http":
			return []config.Component{config.NewComponent(f.typ, keys(4318))}, nil
		}
		return []config.Component{config.NewComponent(f.typ, keys(8640))}, nil
	}
	if f.security {
		return nil, usagef("serve: --security is for -t zico and -t otlp")
	}
	r, err := f.receiver()
	if err != nil {
		return nil, err
	}
	return []config.Component{r}, nil
}

// receiver describes the receiver of KDB's command line.
func (f *serveFlags) receiver() (config.Component, error) {
	for _, p := range []struct {
		flag string
		port int
	}{{"-p", f.port}, {"--registry-port", f.registryPort}, {"--mqtt-port", f.mqttPort}} {
		if p.port < -1 || p.port > 65535 {
			return config.Component{}, usagef("serve: %s %d: a port is 0 to 65535", p.flag, p.port)
		}
	}
	keys := map[string]any{"mapping": f.mapping}
	broker := func() {
		for k, v := range map[string]any{"user": f.user, "password": f.password, "destination": f.destination,
			"dead_letter": f.deadLetter, "encoding": f.encoding} {
			keys[k] = v
		}
	}
	r := func() config.Component { return config.NewComponent(f.typ, keys) }
	host := f.host
	switch f.typ {
	case "jfr":
		if f.repository == "" {
			return config.Component{}, usagef("serve: -t jfr needs --repository DIR (the JVMs' -XX:FlightRecorderOptions:repository=DIR)")
		}
		if f.mapping != "" || f.port >= 0 || f.respawn {
			return config.Component{}, usagef("serve: -t jfr takes --repository and -h HOST, not -m, -p or --respawn")
		}
		return config.NewComponent(f.typ, map[string]any{"repository": f.repository, "host": f.host}), nil
	case "jms-client", "stomp-client", "nats-client", "mqtt-client":
		example := map[string]string{"jms-client": "stomp://HOST:61613", "stomp-client": "stomp://HOST:61613",
			"nats-client": "nats://HOST:4222", "mqtt-client": "mqtt://HOST:1883"}[f.typ]
		if f.url == "" {
			return config.Component{}, usagef("serve: -t %s needs -l URL, such as %s", f.typ, example)
		}
		// Not echoed: it may hold a password.
		if !strings.Contains(f.url, "://") {
			return config.Component{}, usagef("serve: -l: want a URL with its scheme, such as %s, not just HOST:PORT", example)
		}
		broker()
		keys["url"] = f.url
		return r(), nil
	case "jms-embedded", "broker-embedded":
		if host == "" {
			host = "127.0.0.1"
		}
		port := f.port
		if port < 0 {
			port = 4222
		}
		broker()
		keys["listen"] = net.JoinHostPort(host, strconv.Itoa(port))
		if f.mqttPort >= 0 {
			keys["mqtt_listen"] = net.JoinHostPort(host, strconv.Itoa(f.mqttPort))
		}
		return r(), nil
	case "tcp-client":
		if host == "" || f.port <= 0 {
			return config.Component{}, usagef("serve: -t tcp-client needs -h HOST and -p PORT")
		}
		keys["connect"] = net.JoinHostPort(host, strconv.Itoa(f.port))
		keys["respawn"] = f.respawn
		return r(), nil
	case "tcp-server", "kdb-tcp", "tcp-single-server", "kieker-tcp", "kieker-tcp-dual":
	default:
		return config.Component{}, usagef("serve: unknown type %q", f.typ)
	}
	if f.respawn {
		return config.Component{}, usagef("serve: --respawn is for -t tcp-client")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if f.port < 0 {
		return config.Component{}, usagef("serve: -t %s needs -p PORT", f.typ)
	}
	keys["listen"] = net.JoinHostPort(host, strconv.Itoa(f.port))
	if f.typ == "kieker-tcp-dual" {
		if f.registryPort < 0 {
			return config.Component{}, usagef("serve: -t kieker-tcp-dual needs --registry-port PORT")
		}
		keys["registry_listen"] = net.JoinHostPort(host, strconv.Itoa(f.registryPort))
	}
	if f.typ == "kieker-tcp" || f.typ == "kieker-tcp-dual" {
		delete(keys, "mapping")
		if f.mapping != "" {
			return config.Component{}, usagef("serve: -m is for the KDB receivers, not -t %s", f.typ)
		}
	}
	return r(), nil
}
