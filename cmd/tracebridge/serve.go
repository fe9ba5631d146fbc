package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/daemon"
	"github.com/tracebridge/tracebridge/internal/memlimit"
	"github.com/tracebridge/tracebridge/internal/serve"
	streamsink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/internal/web"
)

const serveSynopsis = `serve [-c tracebridge.yaml] [-t TYPE -p PORT [-h HOST] [-m MAPPING] [--respawn]] [-L PATHS] [-k kieker.monitoring.properties] [--data-dir DIR] [-v N] [-s] [-d] [--metrics HOST:PORT] [--http HOST:PORT|off] [--stream HOST:PORT|nats://…|off] [--kieker-port ADDR] [--kdb-port ADDR] [--otlp-grpc ADDR] [--otlp-http ADDR] [--zico ADDR] [--split SPEC…]

Without -c or -t, serve runs the embedded default: a Kieker TCP receiver on
127.0.0.1:10133, a KDB binary receiver on 127.0.0.1:10144 (default mapping),
OTLP on 127.0.0.1:4317 (gRPC) and 127.0.0.1:4318 (HTTP), ZICO (zorka agents)
on 127.0.0.1:8640, a binary Kieker log and the trace store under
./tracebridge-data, the HTTP API on 127.0.0.1:16686 (docs/API.md) and the
live stream on the embedded NATS server at 127.0.0.1:14222 (tracebridge tail).
--kieker-port (or -p alone), --kdb-port, --otlp-grpc, --otlp-http, --zico,
--http and --stream move its listeners (ADDR: PORT, HOST:PORT or off).

Receiver types (-t): tcp-server, tcp-single-server, tcp-client (the KDB binary
dialect), kieker-tcp (Kieker's single-socket TCP), kieker-tcp-dual,
stomp-client (alias jms-client; -l stomp://HOST:61613 -u USER -w PASS),
broker-embedded (alias jms-embedded; -p 4222 [--mqtt-port 1883]),
nats-client (-l nats://HOST:4222), mqtt-client (-l mqtt://HOST:1883),
otlp (OTLP/gRPC on 4317 and OTLP/HTTP on 4318), otlp-grpc, otlp-http,
zico (zorka agents; default port 8640),
jfr (--repository DIR [-h HOST]: follow the JFR repository of running JVMs).

Exit codes: 1 mapping file, 2 configuration, 3 communication, 4 command line.`

// serveFlags are KDB's command line plus tracebridge's own: cfg describes
// the configuration (config.FromFlags), the rest how serve runs.
type serveFlags struct {
	cfg                 config.Flags
	pidFile, logFile    string
	verbose             int
	stats, daemon, help bool
}

// serveFlagSet defines serve's options, KDB's under a short and a long
// name each.
func serveFlagSet(stderr io.Writer) (*flag.FlagSet, *serveFlags, *options) {
	fs := newFlags("serve", serveSynopsis, stderr)
	f := &serveFlags{}
	o := &options{fs: fs, synopsis: serveSynopsis}
	fs.Usage = func() { io.WriteString(fs.Output(), o.help()) }
	o.str(&f.cfg.ConfigFile, "c", "config", "FILE", "", "YAML configuration with receivers and sinks")
	o.str(&f.cfg.Type, "t", "type", "TYPE", "", "receiver type: tcp-server, tcp-single-server, tcp-client, kieker-tcp, kieker-tcp-dual, stomp-client, broker-embedded, nats-client, mqtt-client, otlp, otlp-grpc, otlp-http, zico, jfr")
	o.str(&f.cfg.Host, "h", "host", "HOST", "", "host to connect to (tcp-client) or listen on (servers and broker-embedded; default 127.0.0.1); jfr: the monitored host's name (default this machine's)")
	o.int(&f.cfg.Port, "p", "port", "PORT", -1, "port to listen on (servers: required, 0 picks a free one; broker-embedded: default 4222; otlp-grpc 4317, otlp-http 4318, zico 8640) or connect to (tcp-client)")
	o.int(&f.cfg.RegistryPort, "", "registry-port", "PORT", -1, "registry port of kieker-tcp-dual (required with it)")
	o.str(&f.cfg.URL, "l", "url", "URL", "", "broker URL: stomp://HOST:61613, stomp+ssl://HOST:61614, nats://HOST:4222, mqtt://HOST:1883")
	o.str(&f.cfg.User, "u", "user", "USER", "", "broker user name")
	o.str(&f.cfg.Password, "w", "password", "PASSWORD", "", "broker password (never logged)")
	o.str(&f.cfg.Destination, "", "destination", "NAME", "", "STOMP destination, NATS subject or MQTT topic (default /queue/kieker.tools.bridge, kieker.tools.bridge, kieker/tools/bridge)")
	o.str(&f.cfg.DeadLetter, "", "dead-letter", "DESTINATION", "", "broker destination receiving a copy of each malformed message: a STOMP destination (/queue/NAME), NATS subject or MQTT topic; not a file path")
	o.str(&f.cfg.Encoding, "", "encoding", "auto|text|binary", "", "broker message bodies (default auto: text/* content types and bodies starting with a digit are text)")
	o.int(&f.cfg.MQTTPort, "", "mqtt-port", "PORT", -1, "broker-embedded: also listen for MQTT clients on this port (default: no MQTT)")
	o.str(&f.cfg.Repository, "", "repository", "DIR", "", "jfr: the JVMs' repository (-XX:FlightRecorderOptions:repository=DIR); it may appear later")
	o.str(&f.cfg.Mapping, "m", "map", "FILE", "", "KDB mapping file of id=class lines (default: ids for common Kieker types)")
	o.value((*listFlag)(&f.cfg.Libraries), "L", "libraries", "PATHS", "IRL files or directories with more record types (repeatable, or ':'-separated)")
	o.str(&f.cfg.KiekerProperties, "k", "kieker", "FILE", "", "kieker.monitoring.properties configuring the Kieker log")
	o.int(&f.verbose, "v", "verbose", "N", 0, "print 'received <count> records' every N records (default: never)")
	o.bool(&f.stats, "s", "stats", "print the active time (first to last record), ns per record and records per second at the end")
	o.bool(&f.daemon, "d", "daemon", "detach from the console; write a PID file")
	o.bool(&f.cfg.Respawn, "", "respawn", "tcp-client: reconnect with back-off when the connection fails")
	o.bool(&f.cfg.Insecure, "", "insecure", "the receiver of -t, those moved to HOST:PORT by --kieker-port and its like, and the stream listen in plain text off loopback (-h 0.0.0.0); without it a listener off loopback needs TLS (tls: in a configuration file)")
	o.bool(&f.cfg.Security, "", "security", "zico, otlp: only hosts of the host table (DATA-DIR/hosts) may send (tracebridge hosts add), with their secret (a ZICO HELLO's, an OTLP bearer token)")
	o.value((*repeatFlag)(&f.cfg.Split), "", "split", "SPEC", "cut traces at component boundaries: package:N, regex:P…, map:FILE (repeatable)")
	o.str(&f.cfg.DataDir, "", "data-dir", "DIR", "", "directory for logs and the trace store (default ./tracebridge-data)")
	o.bool(&f.cfg.NoStore, "", "no-store", "do not keep traces in the trace store (DATA-DIR/store)")
	o.str(&f.cfg.Stream, "", "stream", "HOST:PORT|URL|off", "", "the live stream: the embedded NATS server's address, an external server (nats://HOST:PORT), or off (default: the embedded default's 127.0.0.1:14222, a YAML file's stream: section, none with -t)")
	o.str(&f.cfg.Metrics, "", "metrics", "HOST:PORT", "", "serve Prometheus metrics on HOST:PORT")
	o.str(&f.cfg.HTTP, "", "http", "HOST:PORT|off", "", "serve the HTTP API, Jaeger's query API and the web UI on HOST:PORT (default: the embedded default's "+config.DefaultHTTP+")")
	f.cfg.Listen = map[string]string{}
	for _, l := range config.ListenerFlags {
		o.value(listenFlag{f.cfg.Listen, l.Type}, "", l.Flag, "[HOST:]PORT|off", listenHelp(l.Type))
	}
	o.str(&f.pidFile, "", "pid-file", "FILE", "tracebridge.pid", "PID file written with -d")
	o.str(&f.logFile, "", "log-file", "FILE", "tracebridge.log", "where a daemon (-d) writes its output")
	o.bool(&f.help, "", "help", "show this help (so does -h alone)")
	return fs, f, o
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f, opts := serveFlagSet(stderr)
	// -h is KDB's host flag; alone it asks for help, as for every command.
	if len(args) == 1 && args[0] == "-h" {
		return helpRequest{opts.help()}
	}
	pos, err := parseArgs(fs, args)
	if err == nil && f.help {
		return helpRequest{opts.help()}
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
	// The process is the bridge's: it aims below memlimit.DefaultTarget
	// unless the configuration sizes it.
	set := serve.Settings{Logger: logger, Version: version, UI: web.Handler(), MemoryTarget: memlimit.DefaultTarget,
		ShutdownHint: "a second Ctrl-C stops now; the records are then lost"}
	if f.verbose > 0 {
		set.ListenerInterval = int64(f.verbose)
		set.Listener = func(count int64, msg string) {
			if msg == "" {
				fmt.Fprintf(stdout, "received %d records\n", count)
			}
		}
	}
	srv, err := serve.Build(cfg, set)
	var inUse *serve.AddrInUseError
	if errors.As(err, &inUse) {
		return serveError(fmt.Errorf("%w; another program holds the port: %s", err, f.moveHint(cfg, inUse)))
	}
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
	mib := func(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
	mem := fmt.Sprintf("tracebridge: memory limit %s (%s)", mib(srv.Memory.Limit()), srv.MemoryFrom)
	if t := srv.Memory.Target(); t > 0 {
		mem += fmt.Sprintf(", target %s", mib(t))
	}
	if g := srv.GoMemoryLimit(); g > 0 {
		mem += fmt.Sprintf(", Go's soft limit %s", mib(g))
	} else {
		mem += ", Go's soft limit from GOMEMLIMIT"
	}
	fmt.Fprintln(stdout, mem)
	fmt.Fprintln(stdout, "tracebridge: ready")
	if daemon.IsChild() {
		if err := daemon.WritePIDFile(f.pidFile); err != nil {
			srv.Close()
			return withCode(exitConfig, err)
		}
		defer daemon.RemovePIDFile(f.pidFile)
	}
	// A second signal while shutdown waits for the sinks ends serve at
	// once: say first what they had not delivered.
	stopNow := onSecondSignal(ctx, func() {
		for _, u := range srv.Engine.Undelivered() {
			logger.Error("stopping now: records not delivered; they are lost", "sink", u.Sink, "records", u.Records)
		}
	})
	runErr := srv.Run(ctx)
	stopNow()
	if f.stats {
		st := srv.Engine.Stats()
		// KDB's performance statistic, over the time records flowed
		// (first to last), not the idle time around it.
		if st.Active <= 0 {
			// All records went to the sinks at once: there is no active
			// time to divide by, and the run time would be mostly idle.
			fmt.Fprintf(stdout, "tracebridge: %d records, all handed on at once: too few to time (run time %.3f s)\n",
				st.Records, st.Elapsed.Seconds())
		} else {
			fmt.Fprintf(stdout, "tracebridge: %d records in %.3f s active (first to last record; run time %.3f s), %.1f ns per record, %.0f records per second\n",
				st.Records, st.Active.Seconds(), st.Elapsed.Seconds(), st.NanosPerRecord(), st.RecordsPerSecond())
		}
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

// config builds the configuration the flags describe.
func (f *serveFlags) config() (*config.Config, error) {
	cfg, err := config.FromFlags(f.cfg)
	var fe *config.FlagError
	if errors.As(err, &fe) {
		return nil, usagef("serve: %s", fe.Msg)
	}
	if err != nil {
		return nil, withCode(exitConfig, err)
	}
	return cfg, nil
}

// moveHint says how to move a listener whose port is taken: the flag and
// the configuration file's key.
func (f *serveFlags) moveHint(cfg *config.Config, e *serve.AddrInUseError) string {
	file := "a configuration file"
	if f.cfg.ConfigFile != "" {
		file = f.cfg.ConfigFile
	}
	switch e.Kind {
	case "http":
		return "move the HTTP API and web UI with --http HOST:PORT (or off), or in " + file + " with http: {listen: HOST:PORT}"
	case "stream":
		return "move the live stream's embedded NATS server with --stream HOST:PORT (or off), or in " + file + " with stream: {listen: HOST:PORT}"
	case "metrics":
		return "move the metrics endpoint with --metrics HOST:PORT, or in " + file + " with metrics: HOST:PORT"
	case "sink":
		return fmt.Sprintf("move the sink with its listen: key in %s (sinks: [{name: %s, type: %s, listen: HOST:PORT}])", file, e.Name, e.Type)
	}
	key := fmt.Sprintf("its listen: key in %s (receivers: [{name: %s, type: %s, listen: HOST:PORT}])", file, e.Name, e.Type)
	same := 0
	for _, r := range cfg.Receivers {
		if r.Type == e.Type {
			same++
		}
	}
	var flags []string
	switch {
	case f.cfg.Type != "" && f.cfg.Type != "otlp":
		flags = append(flags, "-p PORT")
	case same == 1 && config.ListenerFlag(e.Type) != "":
		flags = append(flags, "--"+config.ListenerFlag(e.Type)+" [HOST:]PORT (or off)")
		if e.Type == "kieker-tcp" && f.cfg.ConfigFile == "" && f.cfg.Type == "" {
			flags = append(flags, "-p PORT")
		}
	}
	if len(flags) == 0 {
		return "move the receiver with " + key
	}
	return "move the receiver with " + strings.Join(flags, " or ") + ", or with " + key
}

// listenFlag is a flag that moves the one receiver of a type
// (config.Flags.Listen).
type listenFlag struct {
	m   map[string]string
	typ string
}

func (l listenFlag) String() string {
	if l.m == nil {
		return ""
	}
	return l.m[l.typ]
}

func (l listenFlag) Set(v string) error {
	l.m[l.typ] = v
	return nil
}

// listenHelp describes the flag that moves the receivers of type typ.
func listenHelp(typ string) string {
	what := map[string]string{
		"kieker-tcp": "the Kieker TCP receiver (kieker-tcp)",
		"tcp-server": "the KDB binary receiver (tcp-server)",
		"otlp-grpc":  "the OTLP/gRPC receiver",
		"otlp-http":  "the OTLP/HTTP receiver",
		"zico":       "the ZICO receiver (zorka agents)",
	}[typ]
	at := ""
	for _, l := range config.ListenerFlags {
		if l.Type == typ {
			at = l.Listen
		}
	}
	help := "move " + what + " to PORT on 127.0.0.1, or to HOST:PORT, or turn it off (default " + at
	if typ == "kieker-tcp" {
		help += "; -p PORT alone moves it too"
	}
	return help + "); with -t or -c: the one receiver of its type"
}
