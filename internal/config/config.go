package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Config is everything a user sets for `tracebridge serve`: the receivers,
// stages and sinks, and the bridge's own settings. A YAML file (-c) holds
// one; KDB's command-line flags and Kieker's properties files map onto it.
// Each component keeps its own keys: its factory decodes them (see
// Component.Decode).
type Config struct {
	// DataDir is where logs go unless a sink says otherwise
	// (default ./tracebridge-data).
	DataDir string `yaml:"data_dir"`
	// Metrics is the address of the Prometheus endpoint (e.g.
	// 127.0.0.1:9464); empty: none.
	Metrics string `yaml:"metrics"`
	// MetricsInsecure lets the metrics endpoint, which has no TLS, listen
	// off loopback (internal/listenpolicy); it says so at start-up.
	MetricsInsecure bool `yaml:"metrics_insecure,omitempty"`
	// HTTP is the listener of the HTTP API and the web UI (http.go).
	HTTP HTTP `yaml:"http,omitempty"`
	// Libraries are IRL files or directories with more record types.
	Libraries []string `yaml:"libraries"`
	// QueueBatches bounds the batches waiting between receivers and
	// stages, and is the default bound of each sink's queue.
	QueueBatches int `yaml:"queue_batches"`
	// FlushInterval: how often sinks are flushed (default 1s).
	FlushInterval pipeline.Duration `yaml:"flush_interval"`
	// ShutdownTimeout bounds draining on SIGTERM (default 30s).
	ShutdownTimeout pipeline.Duration `yaml:"shutdown_timeout"`
	// MemoryLimit is what the whole process may use (e.g. 512MiB); near
	// it the receivers refuse new data with their protocol's retryable
	// answer (internal/memlimit). 0: derived from the cgroup's limit and
	// the machine's memory (memlimit.Default).
	MemoryLimit pipeline.ByteSize `yaml:"memory_limit,omitempty"`
	// MemoryTarget is the size the whole process aims to stay under
	// (e.g. 256MiB): Go's collector runs more often as the heap comes
	// near it, nothing is refused (internal/memlimit: the Go runtime's
	// soft limit, raised to what is in use plus a quarter). 0: for
	// `tracebridge serve` 256MiB (memlimit.DefaultTarget) when
	// memory_limit is derived, none (the limit's) when memory_limit is
	// set or the bridge is embedded. At most memory_limit.
	MemoryTarget pipeline.ByteSize `yaml:"memory_target,omitempty"`

	// Traces configures trace assembly (which runs when a sink needs
	// traces: the trace store, OTLP spans into a Kieker log).
	Traces Traces `yaml:"traces"`

	// Split cuts huge traces into linked partial traces at these
	// component boundaries (package:N, regex:…, map:FILE) between the
	// receivers and the sinks: shorthand for a split stage before the
	// stages listed under stages.
	Split []string `yaml:"split"`

	Receivers []Component `yaml:"receivers"`
	Stages    []Component `yaml:"stages"`
	Sinks     []Component `yaml:"sinks"`

	// Stream is the live stream (docs/STREAM.md): everything received,
	// published to a JetStream repository that `tracebridge tail`, `dump`
	// and the Go API read, with remote control. Its keys are the stream
	// sink's (internal/sink/stream.Config) plus queue_batches; nil (no
	// `stream:` in the file) runs no stream. Not to be confused with the
	// `stream` key of a nats-client receiver, which names the JetStream
	// stream that receiver consumes.
	Stream *Component `yaml:"stream,omitempty"`

	// Cluster makes this bridge a node of a cluster (cluster.go,
	// docs/CLUSTER.md); nil: a single bridge.
	Cluster *Cluster `yaml:"cluster,omitempty"`
}

// Traces configures trace assembly.
type Traces struct {
	// Window: a trace is complete this long after its last span or
	// record (default 2s).
	Window pipeline.Duration `yaml:"window"`
	// MaxOpenTraces bounds the traces assembled at once (default
	// 100000); MaxSpans the spans held per trace (default 200000; a
	// larger trace is handed on in parts).
	MaxOpenTraces int `yaml:"max_open_traces"`
	MaxSpans      int `yaml:"max_spans"`
	// Workers is how many goroutines assemble traces, each owning the
	// traces whose trace id maps to it (Kieker records all on one): 0,
	// the default, one per core the Go runtime uses (GOMAXPROCS); 1
	// assembles on the engine's drain goroutine.
	Workers int `yaml:"workers"`
}

// Component is one receiver, stage or sink of the configuration: the keys
// every component has (type, name; for sinks policy and queue_batches) and
// the rest of its YAML node, which the component's own configuration
// struct decodes.
type Component struct {
	Type string
	Name string
	// Policy is a sink's delivery policy: durable or best-effort (empty:
	// the sink type's default).
	Policy string
	// QueueBatches bounds a sink's queue (0: the top-level queue_batches).
	QueueBatches int

	node *yaml.Node // a mapping without the keys above
	line int
}

// UnmarshalYAML takes the common keys and keeps the rest.
func (c *Component) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a component is a mapping (type: …, …)", n.Line)
	}
	rest := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "type":
			err = v.Decode(&c.Type)
		case "name":
			err = v.Decode(&c.Name)
		case "policy":
			err = v.Decode(&c.Policy)
		case "queue_batches":
			err = v.Decode(&c.QueueBatches)
		default:
			rest.Content = append(rest.Content, k, v)
		}
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", k.Line, k.Value, err)
		}
	}
	c.node, c.line = rest, n.Line
	return nil
}

// MarshalYAML writes the component back as one mapping.
func (c Component) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	add := func(k string, v any) {
		var vn yaml.Node
		_ = vn.Encode(v)
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, &vn)
	}
	if c.Type != "" { // the stream has none
		add("type", c.Type)
	}
	if c.Name != "" {
		add("name", c.Name)
	}
	if c.Policy != "" {
		add("policy", c.Policy)
	}
	if c.QueueBatches != 0 {
		add("queue_batches", c.QueueBatches)
	}
	if c.node != nil {
		n.Content = append(n.Content, c.node.Content...)
	}
	return n, nil
}

// NewComponent returns a component of type typ with the given keys, as if
// read from YAML (the command line builds its receivers this way).
// Settings with a zero value are left out.
func NewComponent(typ string, settings map[string]any) Component {
	c := Component{Type: typ, node: &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.Set(k, settings[k])
	}
	return c
}

// Set sets key to v (a zero v is ignored), replacing an earlier value.
func (c *Component) Set(key string, v any) {
	if v == nil || reflect.ValueOf(v).IsZero() {
		return
	}
	var vn yaml.Node
	if err := vn.Encode(v); err != nil {
		return
	}
	if c.node == nil {
		c.node = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	for i := 0; i+1 < len(c.node.Content); i += 2 {
		if c.node.Content[i].Value == key {
			c.node.Content[i+1] = &vn
			return
		}
	}
	c.node.Content = append(c.node.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, &vn)
}

// Delete removes key.
func (c *Component) Delete(key string) {
	if c.node == nil {
		return
	}
	for i := 0; i+1 < len(c.node.Content); i += 2 {
		if c.node.Content[i].Value == key {
			c.node.Content = append(c.node.Content[:i], c.node.Content[i+2:]...)
			return
		}
	}
}

// Has reports whether the component sets key.
func (c *Component) Has(key string) bool {
	if c.node == nil {
		return false
	}
	for i := 0; i+1 < len(c.node.Content); i += 2 {
		if c.node.Content[i].Value == key {
			return true
		}
	}
	return false
}

// Decode decodes the component's keys into cfg, a pointer to the
// component's configuration struct (holding its defaults). A key the
// struct does not know is an error naming the key, its line and the keys
// the component knows.
func (c *Component) Decode(cfg any) error {
	if c.node == nil || len(c.node.Content) == 0 {
		return nil
	}
	if err := checkKeys(c.node, reflect.TypeOf(cfg)); err != nil {
		return err
	}
	return c.node.Decode(cfg)
}

// checkKeys reports keys of a mapping node that struct type t has no field
// for, looking into nested structs (and inline ones).
func checkKeys(n *yaml.Node, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
		return nil
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil // the type decodes itself
	}
	known := map[string]reflect.Type{}
	collectKeys(t, known)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := known[k.Value]
		if !ok {
			names := make([]string, 0, len(known))
			for name := range known {
				names = append(names, name)
			}
			sort.Strings(names)
			return fmt.Errorf("line %d: unknown key %q (known keys: %s)", k.Line, k.Value, strings.Join(names, ", "))
		}
		if err := checkKeys(v, ft); err != nil {
			return fmt.Errorf("%s: %w", k.Value, err)
		}
	}
	return nil
}

func collectKeys(t reflect.Type, into map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectKeys(ft, into)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		into[name] = f.Type
	}
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

// Marshal writes the configuration as YAML.
func (c *Config) Marshal() ([]byte, error) { return yaml.Marshal(c) }

// Default is the embedded default: a Kieker TCP receiver on
// 127.0.0.1:10133 (Kieker's writers and language packs connect to it), a
// KDB binary receiver on 127.0.0.1:10144 with the default mapping,
// OTLP/gRPC on 127.0.0.1:4317 and OTLP/HTTP on 127.0.0.1:4318 (the
// OpenTelemetry SDKs' defaults), ZICO on 127.0.0.1:8640 (zorka agents), a
// binary Kieker log under ./tracebridge-data, the trace store under
// ./tracebridge-data/store, the HTTP API on 127.0.0.1:16686 and the live
// stream on the embedded NATS server at 127.0.0.1:14222.
func Default() *Config {
	var rs []Component
	for _, l := range ListenerFlags {
		rs = append(rs, NewComponent(l.Type, map[string]any{"listen": l.Listen}))
	}
	return &Config{
		HTTP:      HTTP{Listen: DefaultHTTP},
		Receivers: rs,
		Sinks:     []Component{NewComponent("kieker-log", nil), NewComponent("store", nil)},
		Stream:    &Component{node: NewComponent("stream", map[string]any{"listen": DefaultStreamListen}).node},
	}
}

// MinMemoryLimit is the smallest memory_limit: the bridge's fixed part
// (the binary's pages, buffers, the store's block encoder) needs about
// half of it before any data is in flight.
const MinMemoryLimit = 128 << 20

// DefaultStreamListen is where the embedded default's stream listens.
const DefaultStreamListen = "127.0.0.1:14222"

// Normalize fills in defaults (data directory, names) and checks what the
// configuration says about itself (the components check their own keys
// when they are built), returning every problem found.
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
	if c.Stream != nil && (c.Stream.Type != "" || c.Stream.Name != "") {
		errs = append(errs, fmt.Errorf("stream (line %d): type and name are not keys of the stream (it is the sink named stream)", c.Stream.line))
	}
	if c.Stream != nil && c.Stream.Policy != "" {
		if _, err := pipeline.ParsePolicy(c.Stream.Policy); err != nil {
			errs = append(errs, fmt.Errorf("stream (line %d): %w", c.Stream.line, err))
		}
	}
	if c.MemoryLimit < 0 || c.MemoryLimit > 0 && c.MemoryLimit < MinMemoryLimit {
		errs = append(errs, fmt.Errorf("memory_limit %s: want at least %s (or leave it out: derived from the machine)", c.MemoryLimit, pipeline.ByteSize(MinMemoryLimit)))
	}
	switch {
	case c.MemoryTarget < 0 || c.MemoryTarget > 0 && c.MemoryTarget < MinMemoryLimit:
		errs = append(errs, fmt.Errorf("memory_target %s: want at least %s", c.MemoryTarget, pipeline.ByteSize(MinMemoryLimit)))
	case c.MemoryLimit > 0 && c.MemoryTarget > c.MemoryLimit:
		errs = append(errs, fmt.Errorf("memory_target %s: above memory_limit %s", c.MemoryTarget, c.MemoryLimit))
	}
	if c.Cluster != nil {
		if err := c.Cluster.Normalize(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Traces.Window < 0 || c.Traces.MaxOpenTraces < 0 || c.Traces.MaxSpans < 0 || c.Traces.Workers < 0 {
		errs = append(errs, errors.New("traces: window and limits must not be negative"))
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
	for _, list := range []struct {
		what  string
		comps []Component
	}{{"receiver", c.Receivers}, {"stage", c.Stages}, {"sink", c.Sinks}} {
		for i := range list.comps {
			x := &list.comps[i]
			if x.Type == "" {
				errs = append(errs, fmt.Errorf("%s %d (line %d): type missing", list.what, i+1, x.line))
				continue
			}
			x.Name = name(x.Name, x.Type)
			if seen[x.Name] {
				errs = append(errs, fmt.Errorf("%s %s: name used twice", list.what, x.Name))
			}
			seen[x.Name] = true
			if x.Policy != "" {
				if list.what != "sink" {
					errs = append(errs, fmt.Errorf("%s %s: policy is a key of sinks", list.what, x.Name))
				} else if _, err := pipeline.ParsePolicy(x.Policy); err != nil {
					errs = append(errs, fmt.Errorf("sink %s: %w", x.Name, err))
				}
			}
			if x.QueueBatches != 0 && list.what != "sink" {
				errs = append(errs, fmt.Errorf("%s %s: queue_batches is a key of sinks", list.what, x.Name))
			}
		}
	}
	return errors.Join(errs...)
}
