package config

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Flags are the command-line flags of `tracebridge serve` that describe a
// configuration: the Kieker Data Bridge's (KDB's) receiver flags and
// tracebridge's own overrides. Ports are -1 when not given.
type Flags struct {
	ConfigFile string // -c: a YAML file; excludes the receiver flags

	// The receiver (-t and its flags).
	Type, Host, Mapping, URL, User, Password, Destination, DeadLetter, Encoding, Repository string
	Port, RegistryPort, MQTTPort                                                            int
	Respawn, Security                                                                       bool
	// Insecure (--insecure) lets the receiver of -t and the stream of
	// --stream ADDR listen in plain text off loopback (-h 0.0.0.0).
	Insecure bool

	KiekerProperties string   // -k: the Kieker log's kieker.monitoring.properties
	Stream           string   // the live stream: a listen address, a URL or "off"
	DataDir          string   // --data-dir
	Metrics          string   // --metrics
	HTTP             string   // --http: the API's address, or "off"
	NoStore          bool     // --no-store: no store sink
	Libraries        []string // -L: more IRL record types
	Split            []string // --split: boundary specs

	// Listen moves receivers by type (the keys of ListenerFlags): each
	// value is "[HOST:]PORT" (the host 127.0.0.1 when only a port is
	// given) or "off" (no such receiver). A flag applies to the one
	// receiver of its type: the embedded default's, -t's or a -c file's.
	Listen map[string]string
}

// ListenerFlags are the receivers of the embedded default (Default): their
// types, the flags (without dashes) that move them, and where they listen.
var ListenerFlags = []struct{ Type, Flag, Listen string }{
	{"kieker-tcp", "kieker-port", "127.0.0.1:10133"},
	{"tcp-server", "kdb-port", "127.0.0.1:10144"},
	{"otlp-grpc", "otlp-grpc", "127.0.0.1:4317"},
	{"otlp-http", "otlp-http", "127.0.0.1:4318"},
	{"zico", "zico", "127.0.0.1:8640"},
}

// ListenerFlag returns the flag (without dashes) that moves the one
// receiver of type typ, "" when there is none.
func ListenerFlag(typ string) string {
	for _, l := range ListenerFlags {
		if l.Type == typ {
			return l.Flag
		}
	}
	return ""
}

// FlagError is a combination of flags that describes no configuration.
type FlagError struct{ Msg string }

func (e *FlagError) Error() string { return e.Msg }

func flagErrorf(format string, args ...any) error {
	return &FlagError{fmt.Sprintf(format, args...)}
}

// FromFlags builds the configuration the flags describe: a YAML file (-c)
// with the flags' overrides, one receiver, the Kieker log and the store
// described by KDB's flags (-t …), or the embedded default (Default). A
// combination of flags that describes no configuration is a *FlagError;
// other errors are Load's.
func FromFlags(f Flags) (*Config, error) {
	var cfg *Config
	receiverFlags := f.Type != "" || f.Host != "" || f.Mapping != "" || f.Respawn || f.RegistryPort >= 0 ||
		f.URL != "" || f.User != "" || f.Password != "" || f.Destination != "" || f.DeadLetter != "" || f.Encoding != "" || f.MQTTPort >= 0 || f.Security ||
		f.Repository != ""
	if f.Port >= 0 && !receiverFlags && f.ConfigFile == "" {
		// -p alone moves the embedded default's Kieker TCP receiver.
		if f.Listen["kieker-tcp"] != "" {
			return nil, flagErrorf("-p and --kieker-port both move the Kieker TCP receiver; give one")
		}
		f.Listen = maps.Clone(f.Listen)
		if f.Listen == nil {
			f.Listen = map[string]string{}
		}
		f.Listen["kieker-tcp"] = strconv.Itoa(f.Port)
		f.Port = -1
	}
	kdbFlags := receiverFlags || f.Port >= 0
	switch {
	case f.ConfigFile != "" && kdbFlags:
		return nil, flagErrorf("-c and the receiver flags (-t, -p, -h, -m, -l, -u, -w, --respawn, …) exclude each other")
	case f.ConfigFile != "":
		c, err := Load(f.ConfigFile)
		if err != nil {
			return nil, err
		}
		cfg = c
		if f.KiekerProperties != "" {
			for i := range cfg.Sinks {
				if cfg.Sinks[i].Type == "kieker-log" && !cfg.Sinks[i].Has("kieker_properties") {
					cfg.Sinks[i].Set("kieker_properties", f.KiekerProperties)
				}
			}
		}
	case kdbFlags:
		if f.Type == "" {
			return nil, flagErrorf("the receiver flags (-h, -m, -l, …) need -t TYPE (-p alone moves the default's Kieker TCP receiver; --kieker-port, --kdb-port, --otlp-grpc, --otlp-http and --zico move the default's receivers)")
		}
		rs, err := f.receivers()
		if err != nil {
			return nil, err
		}
		cfg = &Config{
			Receivers: rs,
			Sinks:     []Component{NewComponent("kieker-log", map[string]any{"kieker_properties": f.KiekerProperties}), NewComponent("store", nil)},
		}
	default:
		cfg = Default()
		cfg.Sinks[0].Set("kieker_properties", f.KiekerProperties)
	}
	if f.NoStore {
		cfg.Sinks = slices.DeleteFunc(cfg.Sinks, func(c Component) bool { return c.Type == "store" })
	}
	switch {
	case f.Stream == "":
	case f.Stream == "off":
		cfg.Stream = nil
	default:
		var c Component
		if cfg.Stream != nil {
			c = *cfg.Stream
		}
		key, other := "listen", "url"
		if strings.Contains(f.Stream, "://") {
			key, other = "url", "listen"
		}
		c.Delete(other)
		c.Set(key, f.Stream)
		if f.Insecure && key == "listen" {
			c.Set("insecure", true)
		}
		cfg.Stream = &c
	}
	if err := f.moveReceivers(cfg); err != nil {
		return nil, err
	}
	if f.Insecure && f.Type == "" && f.Metrics == "" && len(f.Listen) == 0 && (f.Stream == "" || f.Stream == "off" || strings.Contains(f.Stream, "://")) {
		return nil, flagErrorf("--insecure is for the listening receiver of -t (with -h), the receivers moved by --kieker-port and its like, --stream HOST:PORT and --metrics; in a configuration file set insecure: true on the listener")
	}
	if f.DataDir != "" {
		cfg.DataDir = f.DataDir
	}
	if f.Metrics != "" {
		cfg.Metrics = f.Metrics
		cfg.MetricsInsecure = cfg.MetricsInsecure || f.Insecure
	}
	switch f.HTTP {
	case "":
	case "off":
		cfg.HTTP = HTTP{}
	default:
		cfg.HTTP.Listen = f.HTTP
	}
	cfg.Libraries = append(cfg.Libraries, f.Libraries...)
	cfg.Split = append(cfg.Split, f.Split...)
	return cfg, nil
}

// moveReceivers applies f.Listen to the receivers of cfg.
func (f Flags) moveReceivers(cfg *Config) error {
	for _, l := range ListenerFlags {
		v := f.Listen[l.Type]
		if v == "" {
			continue
		}
		var at []int
		for i, r := range cfg.Receivers {
			if r.Type == l.Type {
				at = append(at, i)
			}
		}
		if len(at) != 1 {
			return flagErrorf("--%s moves the one %s receiver, and the configuration has %d: set the listen: key of the receiver in the configuration file instead", l.Flag, l.Type, len(at))
		}
		if f.Type == l.Type && f.Port >= 0 {
			return flagErrorf("-p and --%s both move the %s receiver; give one", l.Flag, l.Type)
		}
		if v == "off" {
			cfg.Receivers = slices.Delete(cfg.Receivers, at[0], at[0]+1)
			continue
		}
		addr, err := listenAddr(v)
		if err != nil {
			return flagErrorf("--%s %s: %v", l.Flag, v, err)
		}
		cfg.Receivers[at[0]].Set("listen", addr)
		if f.Insecure {
			cfg.Receivers[at[0]].Set("insecure", true)
		}
	}
	return nil
}

// listenAddr returns the address of "[HOST:]PORT": a port alone is on
// 127.0.0.1.
func listenAddr(v string) (string, error) {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		host, port = "127.0.0.1", v
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("want PORT or HOST:PORT (a port from 0 to 65535), or off")
	}
	return net.JoinHostPort(host, port), nil
}

// receivers describes the receivers of KDB's command line: one, or the
// two OTLP receivers of -t otlp.
func (f Flags) receivers() ([]Component, error) {
	if f.Repository != "" && f.Type != "jfr" {
		return nil, flagErrorf("--repository is for -t jfr")
	}
	host := f.Host
	if host == "" {
		host = "127.0.0.1"
	}
	listen := func(port int) string {
		if f.Port >= 0 {
			port = f.Port
		}
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	switch f.Type {
	case "otlp", "otlp-grpc", "otlp-http", "zico":
		if f.Mapping != "" || f.URL != "" || f.Respawn || f.RegistryPort >= 0 || f.MQTTPort >= 0 || f.User != "" ||
			f.Password != "" || f.Destination != "" || f.DeadLetter != "" || f.Encoding != "" {
			return nil, flagErrorf("-t %s takes -p, -h and --security only", f.Type)
		}
		keys := func(port int) map[string]any {
			k := map[string]any{"listen": listen(port), "security": f.Security}
			if f.Insecure {
				k["insecure"] = true
			}
			return k
		}
		switch f.Type {
		case "otlp":
			if f.Port >= 0 {
				return nil, flagErrorf("-t otlp listens on 4317 (gRPC) and 4318 (HTTP); for another port use -t otlp-grpc or -t otlp-http with -p")
			}
			return []Component{NewComponent("otlp-grpc", keys(4317)), NewComponent("otlp-http", keys(4318))}, nil
		case "otlp-grpc":
			return []Component{NewComponent(f.Type, keys(4317))}, nil
		case "otlp-http":
			return []Component{NewComponent(f.Type, keys(4318))}, nil
		}
		return []Component{NewComponent(f.Type, keys(8640))}, nil
	}
	if f.Security {
		return nil, flagErrorf("--security is for -t zico and -t otlp")
	}
	r, err := f.receiver()
	if err != nil {
		return nil, err
	}
	if f.Insecure {
		if !r.Has("listen") {
			return nil, flagErrorf("--insecure is for listening receivers, not -t %s", f.Type)
		}
		r.Set("insecure", true)
	}
	return []Component{r}, nil
}

// receiver describes the receiver of KDB's command line.
func (f Flags) receiver() (Component, error) {
	for _, p := range []struct {
		flag string
		port int
	}{{"-p", f.Port}, {"--registry-port", f.RegistryPort}, {"--mqtt-port", f.MQTTPort}} {
		if p.port < -1 || p.port > 65535 {
			return Component{}, flagErrorf("%s %d: a port is 0 to 65535", p.flag, p.port)
		}
	}
	keys := map[string]any{"mapping": f.Mapping}
	broker := func() {
		for k, v := range map[string]any{"user": f.User, "password": f.Password, "destination": f.Destination,
			"dead_letter": f.DeadLetter, "encoding": f.Encoding} {
			keys[k] = v
		}
	}
	r := func() Component { return NewComponent(f.Type, keys) }
	host := f.Host
	switch f.Type {
	case "jfr":
		if f.Repository == "" {
			return Component{}, flagErrorf("-t jfr needs --repository DIR (the JVMs' -XX:FlightRecorderOptions:repository=DIR)")
		}
		if f.Mapping != "" || f.Port >= 0 || f.Respawn {
			return Component{}, flagErrorf("-t jfr takes --repository and -h HOST, not -m, -p or --respawn")
		}
		return NewComponent(f.Type, map[string]any{"repository": f.Repository, "host": f.Host}), nil
	case "jms-client", "stomp-client", "nats-client", "mqtt-client":
		example := map[string]string{"jms-client": "stomp://HOST:61613", "stomp-client": "stomp://HOST:61613",
			"nats-client": "nats://HOST:4222", "mqtt-client": "mqtt://HOST:1883"}[f.Type]
		if f.URL == "" {
			return Component{}, flagErrorf("-t %s needs -l URL, such as %s", f.Type, example)
		}
		// Not echoed: it may hold a password.
		if !strings.Contains(f.URL, "://") {
			return Component{}, flagErrorf("-l: want a URL with its scheme, such as %s, not just HOST:PORT", example)
		}
		broker()
		keys["url"] = f.URL
		return r(), nil
	case "jms-embedded", "broker-embedded":
		if host == "" {
			host = "127.0.0.1"
		}
		port := f.Port
		if port < 0 {
			port = 4222
		}
		broker()
		keys["listen"] = net.JoinHostPort(host, strconv.Itoa(port))
		if f.MQTTPort >= 0 {
			keys["mqtt_listen"] = net.JoinHostPort(host, strconv.Itoa(f.MQTTPort))
		}
		return r(), nil
	case "tcp-client":
		if host == "" || f.Port <= 0 {
			return Component{}, flagErrorf("-t tcp-client needs -h HOST and -p PORT")
		}
		keys["connect"] = net.JoinHostPort(host, strconv.Itoa(f.Port))
		keys["respawn"] = f.Respawn
		return r(), nil
	case "tcp-server", "kdb-tcp", "tcp-single-server", "kieker-tcp", "kieker-tcp-dual":
	default:
		return Component{}, flagErrorf("unknown type %q", f.Type)
	}
	if f.Respawn {
		return Component{}, flagErrorf("--respawn is for -t tcp-client")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if f.Port < 0 {
		return Component{}, flagErrorf("-t %s needs -p PORT", f.Type)
	}
	keys["listen"] = net.JoinHostPort(host, strconv.Itoa(f.Port))
	if f.Type == "kieker-tcp-dual" {
		if f.RegistryPort < 0 {
			return Component{}, flagErrorf("-t kieker-tcp-dual needs --registry-port PORT")
		}
		keys["registry_listen"] = net.JoinHostPort(host, strconv.Itoa(f.RegistryPort))
	}
	if f.Type == "kieker-tcp" || f.Type == "kieker-tcp-dual" {
		delete(keys, "mapping")
		if f.Mapping != "" {
			return Component{}, flagErrorf("-m is for the KDB receivers, not -t %s", f.Type)
		}
	}
	return r(), nil
}
