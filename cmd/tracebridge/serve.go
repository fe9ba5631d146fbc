package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/serve"
)

const serveSynopsis = `serve [-c tracebridge.yaml] [-t TYPE -p PORT [-h HOST] [-m MAPPING] [--respawn]]
                  [-L PATHS] [-k kieker.monitoring.properties] [--data-dir DIR] [-v N] [-s] [-d]
                  [--metrics HOST:PORT] [--split SPEC…]

Without -c or -t, serve runs the embedded default: a Kieker TCP receiver on
127.0.0.1:10133, a KDB binary receiver on 127.0.0.1:10144 (default mapping)
and a binary Kieker log under ./tracebridge-data.

Receiver types (-t): tcp-server, tcp-single-server, tcp-client (the KDB binary
dialect), kieker-tcp (Kieker's single-socket TCP), kieker-tcp-dual,
stomp-client (alias jms-client; -l stomp://HOST:61613 -u USER -w PASS),
broker-embedded (alias jms-embedded; -p 4222 [--mqtt-port 1883]),
nats-client (-l nats://HOST:4222), mqtt-client (-l mqtt://HOST:1883).

Exit codes: 1 mapping file, 2 configuration, 3 communication, 4 command line.`

// serveFlags are KDB's command line plus tracebridge's own.
type serveFlags struct {
	configFile, typ, host, mapping, kiekerProps, dataDir, metrics, pidFile, logFile string
	url, user, password, destination, deadLetter, encoding                          string
	port, registryPort, mqttPort, verbose                                           int
	libs                                                                            listFlag
	split                                                                           []string
	stats, daemon, respawn                                                          bool
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", serveSynopsis, stderr)
	var f serveFlags
	both := func(p *string, short, long, def, usage string) {
		fs.StringVar(p, short, def, usage)
		fs.StringVar(p, long, def, usage)
	}
	bothInt := func(p *int, short, long string, def int, usage string) {
		fs.IntVar(p, short, def, usage)
		fs.IntVar(p, long, def, usage)
	}
	bothBool := func(p *bool, short, long string, usage string) {
		fs.BoolVar(p, short, false, usage)
		fs.BoolVar(p, long, false, usage)
	}
	both(&f.configFile, "c", "config", "", "YAML configuration with receivers and sinks")
	both(&f.typ, "t", "type", "", "receiver type: tcp-server, tcp-single-server, tcp-client, kieker-tcp, kieker-tcp-dual, stomp-client, broker-embedded, nats-client, mqtt-client")
	both(&f.host, "h", "host", "", "host to connect to (tcp-client) or listen on (servers; default 127.0.0.1)")
	bothInt(&f.port, "p", "port", -1, "port to listen on (servers; 0 picks a free one) or connect to (tcp-client)")
	fs.IntVar(&f.registryPort, "registry-port", -1, "registry port of kieker-tcp-dual")
	both(&f.url, "l", "url", "", "broker URL: stomp://HOST:61613, stomp+ssl://…, nats://HOST:4222, mqtt://HOST:1883")
	both(&f.user, "u", "user", "", "broker user name")
	both(&f.password, "w", "password", "", "broker password (never logged)")
	fs.StringVar(&f.destination, "destination", "", "STOMP destination, NATS subject or MQTT topic (defaults: /queue/kieker.tools.bridge, kieker.tools.bridge, kieker/tools/bridge)")
	fs.StringVar(&f.deadLetter, "dead-letter", "", "broker destination receiving a copy of each malformed message: a STOMP destination (/queue/NAME), NATS subject or MQTT topic; not a file path")
	fs.StringVar(&f.encoding, "encoding", "", "broker message bodies: auto (default), text or binary")
	fs.IntVar(&f.mqttPort, "mqtt-port", -1, "broker-embedded: also listen for MQTT clients on this port")
	both(&f.mapping, "m", "map", "", "KDB mapping file (id=class); default: common Kieker types")
	fs.Var(&f.libs, "L", "IRL files or directories with more record types (repeatable, or ':'-separated)")
	fs.Var(&f.libs, "libraries", "same as -L")
	both(&f.kiekerProps, "k", "kieker", "", "kieker.monitoring.properties configuring the Kieker log")
	bothInt(&f.verbose, "v", "verbose", 0, "print 'received <count> records' every N records")
	bothBool(&f.stats, "s", "stats", "print run time, ns per record and records per second at the end")
	bothBool(&f.daemon, "d", "daemon", "detach from the console; write a PID file")
	fs.BoolVar(&f.respawn, "respawn", false, "tcp-client: reconnect with back-off when the connection fails")
	fs.Func("split", "cut traces at component boundaries: package:N, regex:P…, map:FILE (repeatable)", func(v string) error {
		f.split = append(f.split, v)
		return nil
	})
	fs.StringVar(&f.dataDir, "data-dir", "", "directory for logs (default ./tracebridge-data)")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics on HOST:PORT")
	fs.StringVar(&f.pidFile, "pid-file", "tracebridge.pid", "PID file written with -d")
	fs.StringVar(&f.logFile, "log-file", "tracebridge.log", "where a daemon (-d) writes its output")
	fs.Bool("help", false, "show this help")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if fs.Lookup("help").Value.String() == "true" {
		fs.Usage()
		return nil
	}
	if len(pos) > 0 {
		return usagef("serve: unexpected arguments %v", pos)
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	if f.daemon && os.Getenv(daemonEnv) == "" {
		return daemonize(args, f.pidFile, f.logFile, stdout)
	}

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	set := serve.Settings{Logger: logger}
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
		verb := "listening on"
		switch r.Type {
		case config.TCPClient:
			verb = "connecting to"
		case config.StompClient, config.NATSClient, config.MQTTClient:
			verb = "consuming from"
		}
		fmt.Fprintf(stdout, "tracebridge: receiver %s (%s) %s %s\n", r.Name, r.Type, verb, r.Where)
	}
	for _, s := range srv.Sinks {
		fmt.Fprintf(stdout, "tracebridge: sink %s (%s) writing to %s\n", s.Name, s.Type, s.Where)
	}
	if srv.MetricsAddr != "" {
		fmt.Fprintf(stdout, "tracebridge: metrics on http://%s/metrics\n", srv.MetricsAddr)
	}
	fmt.Fprintln(stdout, "tracebridge: ready")
	if os.Getenv(daemonEnv) != "" {
		if err := writePIDFile(f.pidFile); err != nil {
			srv.Close()
			return withCode(exitConfig, err)
		}
		defer removePIDFile(f.pidFile)
	}
	runErr := srv.Run(ctx)
	if f.stats {
		st := srv.Bridge.Stats()
		fmt.Fprintf(stdout, "tracebridge: run time %.3f s, %d records, %.1f ns per record, %.0f records per second\n",
			st.Elapsed.Seconds(), st.Records, st.NanosPerRecord(), st.RecordsPerSecond())
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
		f.url != "" || f.user != "" || f.password != "" || f.destination != "" || f.deadLetter != "" || f.encoding != "" || f.mqttPort >= 0
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
				if cfg.Sinks[i].Type == config.KiekerLog && cfg.Sinks[i].KiekerProperties == "" {
					cfg.Sinks[i].KiekerProperties = f.kiekerProps
				}
			}
		}
	case kdbFlags:
		if f.typ == "" {
			return nil, usagef("serve: the receiver flags (-p, -h, -m, -l, …) need -t TYPE")
		}
		r, err := f.receiver()
		if err != nil {
			return nil, err
		}
		cfg = &config.Config{
			Receivers: []config.Receiver{r},
			Sinks:     []config.Sink{{Type: config.KiekerLog, KiekerProperties: f.kiekerProps}},
		}
	default:
		cfg = config.Default()
		cfg.Sinks[0].KiekerProperties = f.kiekerProps
	}
	if f.dataDir != "" {
		cfg.DataDir = f.dataDir
	}
	if f.metrics != "" {
		cfg.Metrics = f.metrics
	}
	cfg.Libraries = append(cfg.Libraries, f.libs...)
	cfg.Split = append(cfg.Split, f.split...)
	return cfg, nil
}

func (f *serveFlags) receiver() (config.Receiver, error) {
	for _, p := range []struct {
		flag string
		port int
	}{{"-p", f.port}, {"--registry-port", f.registryPort}, {"--mqtt-port", f.mqttPort}} {
		if p.port < -1 || p.port > 65535 {
			return config.Receiver{}, usagef("serve: %s %d: a port is 0 to 65535", p.flag, p.port)
		}
	}
	r := config.Receiver{Type: f.typ, Mapping: f.mapping, Respawn: f.respawn, URL: f.url, User: f.user, Password: f.password,
		Destination: f.destination, DeadLetter: f.deadLetter, Encoding: f.encoding}
	host := f.host
	switch f.typ {
	case "jms-client", config.StompClient, config.NATSClient, config.MQTTClient:
		if f.url == "" {
			return r, usagef("serve: -t %s needs -l URL", f.typ)
		}
		return r, nil
	case "jms-embedded", config.BrokerEmbedded:
		if host == "" {
			host = "127.0.0.1"
		}
		port := f.port
		if port < 0 {
			port = 4222
		}
		r.Listen = net.JoinHostPort(host, strconv.Itoa(port))
		if f.mqttPort >= 0 {
			r.MQTTListen = net.JoinHostPort(host, strconv.Itoa(f.mqttPort))
		}
		return r, nil
	case config.TCPClient:
		if host == "" || f.port <= 0 {
			return r, usagef("serve: -t tcp-client needs -h HOST and -p PORT")
		}
		r.Connect = net.JoinHostPort(host, strconv.Itoa(f.port))
		return r, nil
	case config.TCPServer, "kdb-tcp", config.TCPSingleServer, config.KiekerTCP, config.KiekerTCPDual:
	default:
		return r, usagef("serve: unknown type %q", f.typ)
	}
	if f.respawn {
		return r, usagef("serve: --respawn is for -t tcp-client")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if f.port < 0 {
		return r, usagef("serve: -t %s needs -p PORT", f.typ)
	}
	r.Listen = net.JoinHostPort(host, strconv.Itoa(f.port))
	if f.typ == config.KiekerTCPDual {
		if f.registryPort < 0 {
			return r, usagef("serve: -t kieker-tcp-dual needs --registry-port PORT")
		}
		r.RegistryListen = net.JoinHostPort(host, strconv.Itoa(f.registryPort))
	}
	return r, nil
}
