package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/mapping"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Console is the running bridge as the console controls it: its
// receivers and sinks, the receivers' configuration, the record
// catalogue. internal/serve implements it over the engine and the
// configuration.
type Console interface {
	// Receivers and Sinks describe the components with their state.
	Receivers() []Component
	Sinks() []Component
	// StopReceiver stops a running receiver (it drains first) and
	// releases its port; StartReceiver builds it again from its
	// configuration and runs it.
	StopReceiver(name string) error
	StartReceiver(name string) error
	// AddReceiver validates a receiver's configuration (its type, name,
	// and settings as the YAML configuration has them) through its
	// factory, builds it and runs it. Errors wrap pipeline.ErrConfig
	// (bad configuration), ErrMapping or ErrComm (a port in use).
	AddReceiver(typ, name string, settings map[string]any) (Component, error)
	// ReceiverConfig returns a receiver's type and its configuration
	// decoded into the config struct of the type's factory (nil when no
	// factory builds the type); ok is false when there is no such
	// receiver.
	ReceiverConfig(name string) (typ string, cfg pipeline.Config, ok bool, err error)
	// SetReceiverKey sets one key of a receiver's configuration (it
	// applies when the receiver starts again).
	SetReceiverKey(name, key string, v any) error
	// Config is the effective configuration as YAML.
	Config() ([]byte, error)
	Factories() *pipeline.Factories
	Catalog() *record.Catalog
	DataDir() string
}

// Counters are the running bridge's record and trace counts;
// internal/serve gives the engine's.
type Counters interface {
	// Delivered returns the records handed to the sinks and how long
	// the bridge has run (0 before it started).
	Delivered() (records int64, running time.Duration)
	// Traces returns the trace assembler's counts.
	Traces() trace.Stats
}

// Component is a receiver or sink.
type Component struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Where string `json:"where"`
	// Policy of a sink: durable or best-effort.
	Policy string `json:"policy,omitempty"`
	// State of a receiver: running, stopped, ended, failed, pending;
	// Since when, Error why it failed.
	State string    `json:"state,omitempty"`
	Since time.Time `json:"since,omitzero"`
	Error string    `json:"error,omitempty"`
}

func (c *call) console() (Console, error) {
	if c.a.opt.Console == nil {
		return nil, errNoBridge
	}
	return c.a.opt.Console, nil
}

// withConsole makes a route's handler of a handler of the console:
// without a bridge the route answers 503.
func withConsole(h func(c *call, b Console) error) func(*call) error {
	return func(c *call) error {
		b, err := c.console()
		if err != nil {
			return err
		}
		return h(c, b)
	}
}

// rateTracker turns counters into rates: the increase since the sample
// taken at least a second before (the average since the API started at
// first).
type rateTracker struct {
	mu   sync.Mutex
	last map[string]rateSample
}

type rateSample struct {
	t    time.Time
	v    float64
	rate float64
}

func (r *rateTracker) rate(key string, v float64, now, started time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]rateSample{}
	}
	s, ok := r.last[key]
	if !ok {
		s = rateSample{t: now, v: v}
		if d := now.Sub(started).Seconds(); d > 0 {
			s.rate = v / d
		}
		r.last[key] = s
		return s.rate
	}
	if d := now.Sub(s.t).Seconds(); d >= 1 {
		s.rate = max(v-s.v, 0) / d
		s.t, s.v = now, v
		r.last[key] = s
	}
	return s.rate
}

// gathered holds metric values by family and the value of one label
// (receiver or sink), summed over the other labels.
type gathered map[string]map[string]float64

func (a *API) gather() gathered {
	out := gathered{}
	if a.opt.Metrics == nil {
		return out
	}
	fams, err := a.opt.Metrics.Gatherer().Gather()
	if err != nil {
		return out
	}
	for _, f := range fams {
		name := f.GetName()
		if !strings.HasPrefix(name, "tracebridge_") {
			continue
		}
		m := map[string]float64{}
		for _, x := range f.GetMetric() {
			key := ""
			for _, l := range x.GetLabel() {
				if l.GetName() == "receiver" || l.GetName() == "sink" {
					key = l.GetValue()
				}
			}
			m[key] += value(x)
		}
		out[name] = m
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// ReceiverInfo is a receiver with its live figures.
type ReceiverInfo struct {
	Component
	Connections      float64 `json:"connections"`
	ConnectionsTotal float64 `json:"connectionsTotal"`
	Rejected         float64 `json:"rejected"`
	Records          float64 `json:"records"`
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	Bytes            float64 `json:"bytes"`
	BytesPerSecond   float64 `json:"bytesPerSecond"`
	DecodeErrors     float64 `json:"decodeErrors"`
}

// ReceiverList is every receiver.
type ReceiverList struct {
	Receivers []ReceiverInfo `json:"receivers"`
}

func (a *API) receiverInfos(b Console) []ReceiverInfo {
	g := a.gather()
	now := a.opt.Now()
	out := []ReceiverInfo{}
	for _, r := range b.Receivers() {
		n := r.Name
		ri := ReceiverInfo{Component: r, Connections: g["tracebridge_connections"][n], ConnectionsTotal: g["tracebridge_connections_total"][n],
			Rejected: g["tracebridge_connections_rejected_total"][n], Records: g["tracebridge_records_received_total"][n],
			Bytes: g["tracebridge_bytes_received_total"][n], DecodeErrors: g["tracebridge_decode_errors_total"][n]}
		ri.RecordsPerSecond = a.rates.rate("r/"+n+"/records", ri.Records, now, a.started)
		ri.BytesPerSecond = a.rates.rate("r/"+n+"/bytes", ri.Bytes, now, a.started)
		out = append(out, ri)
	}
	return out
}

func listReceivers(c *call, b Console) error {
	return c.json(ReceiverList{c.a.receiverInfos(b)})
}

// SinkInfo is a sink with its live figures.
type SinkInfo struct {
	Component
	Records          float64 `json:"records"`
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	Errors           float64 `json:"errors"`
	Dropped          float64 `json:"dropped"`
	Overflow         float64 `json:"overflow"`
	QueueBatches     float64 `json:"queueBatches"`
}

// SinkList is every sink.
type SinkList struct {
	Sinks []SinkInfo `json:"sinks"`
}

func listSinks(c *call, b Console) error {
	g := c.a.gather()
	now := c.a.opt.Now()
	out := SinkList{Sinks: []SinkInfo{}}
	for _, s := range b.Sinks() {
		n := s.Name
		si := SinkInfo{Component: s, Records: g["tracebridge_sink_records_total"][n], Errors: g["tracebridge_sink_errors_total"][n],
			Dropped: g["tracebridge_sink_dropped_records_total"][n], Overflow: g["tracebridge_sink_overflow_records_total"][n],
			QueueBatches: g["tracebridge_sink_queue_batches"][n]}
		si.RecordsPerSecond = c.a.rates.rate("s/"+n+"/records", si.Records, now, c.a.started)
		out.Sinks = append(out.Sinks, si)
	}
	return c.json(out)
}

// TraceCounts are the trace assembler's.
type TraceCounts struct {
	Records  int64 `json:"records"`
	Traces   int64 `json:"traces"`
	Spans    int64 `json:"spans"`
	Broken   int64 `json:"broken"`
	Untraced int64 `json:"untraced"`
	Evicted  int64 `json:"evicted"`
	Parts    int64 `json:"parts"`
	Open     int   `json:"open"`
}

// StatusInfo is the bridge at a glance.
type StatusInfo struct {
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	UptimeNs int64     `json:"uptimeNs"`
	// Records handed to the sinks, and per second now.
	Records          int64   `json:"records"`
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	// QueueBatches wait between the receivers and the sinks.
	QueueBatches float64     `json:"queueBatches"`
	Traces       TraceCounts `json:"traces"`
	// Store: whether there is a trace store, its directory and size.
	Store     bool   `json:"store"`
	StoreDir  string `json:"storeDir,omitempty"`
	StoreSize int64  `json:"storeSize,omitempty"`
	// Writes: whether API tokens are configured; CanWrite: whether this
	// request presented one.
	Writes   bool `json:"writes"`
	CanWrite bool `json:"canWrite"`
	// Live and Profiles: whether /api/live and /api/v1/profiles have a
	// provider.
	Live     bool `json:"live"`
	Profiles bool `json:"profiles"`
}

func status(c *call) error {
	now := c.a.opt.Now()
	s := StatusInfo{Version: c.a.opt.Version, Started: c.a.started, UptimeNs: int64(now.Sub(c.a.started)),
		Writes: c.a.opt.Tokens.Len() > 0, CanWrite: c.writer}
	if e := c.a.opt.Counters; e != nil {
		s.Records, _ = e.Delivered()
		s.RecordsPerSecond = c.a.rates.rate("engine/records", float64(s.Records), now, c.a.started)
		ts := e.Traces()
		s.Traces = TraceCounts{ts.Records, ts.Traces, ts.Spans, ts.Broken, ts.Untraced, ts.Evicted, ts.Parts, ts.Open}
	}
	s.QueueBatches = c.a.gather()["tracebridge_queue_depth_batches"][""]
	if st := c.a.opt.Store(); st != nil {
		s.Store, s.StoreDir, s.StoreSize = true, st.Dir(), st.Size()
	}
	s.Live = c.a.opt.Shared.Live() != nil
	s.Profiles = c.a.opt.Shared.Profiles() != nil
	return c.json(s)
}

// ReceiverInput is the body of POST /api/v1/receivers: a receiver's type,
// name (default: the type) and its configuration keys as the YAML
// configuration has them (/api/v1/component-types lists them).
type ReceiverInput struct {
	Type   string         `json:"type"`
	Name   string         `json:"name"`
	Config map[string]any `json:"config"`
}

// jsonToYAML turns decoded JSON (json.Number for numbers) into values the
// YAML encoder writes as the configuration would have them.
func jsonToYAML(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = jsonToYAML(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonToYAML(e)
		}
	}
	return v
}

func (c *call) receiverInfo(b Console, name string) (ReceiverInfo, error) {
	for _, r := range c.a.receiverInfos(b) {
		if r.Name == name {
			return r, nil
		}
	}
	return ReceiverInfo{}, errorf(http.StatusNotFound, "no receiver %s", name)
}

// componentError maps the errors of building a component to answers (a
// form has no lines, so the configuration's "line 0: " goes).
func componentError(err error) error {
	msg := strings.ReplaceAll(err.Error(), "line 0: ", "")
	switch {
	case errors.Is(err, pipeline.ErrComm):
		return errorf(http.StatusConflict, "%s", msg)
	case errors.Is(err, pipeline.ErrConfig), errors.Is(err, pipeline.ErrMapping):
		return errorf(http.StatusBadRequest, "%s", msg)
	}
	return errorf(http.StatusConflict, "%s", msg)
}

func addReceiver(c *call, b Console) error {
	if ct := c.r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return errorf(http.StatusUnsupportedMediaType, "Content-Type %q: want application/json", ct)
	}
	var in ReceiverInput
	dec := json.NewDecoder(http.MaxBytesReader(c.w, c.r.Body, maxBody))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return errorf(http.StatusBadRequest, "body: %v", err)
	}
	if in.Type == "" {
		return errorf(http.StatusBadRequest, "type: required (one of %s)", strings.Join(b.Factories().ReceiverTypes(), ", "))
	}
	if err := validText("name", in.Name, 255); err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	for k, v := range in.Config {
		if k == "type" || k == "name" {
			return errorf(http.StatusBadRequest, "config: %s goes beside config, not in it", k)
		}
		in.Config[k] = jsonToYAML(v)
	}
	ep, err := b.AddReceiver(in.Type, in.Name, in.Config)
	if err != nil {
		return componentError(err)
	}
	c.a.log.Info("http api: receiver added", "receiver", ep.Name, "type", ep.Type)
	ri, err := c.receiverInfo(b, ep.Name)
	if err != nil {
		ri = ReceiverInfo{Component: ep}
	}
	writeJSON(c.w, http.StatusCreated, ri)
	return nil
}

func (c *call) control(b Console, stop bool) error {
	name := c.str("name")
	if _, err := c.receiverInfo(b, name); err != nil {
		return err
	}
	var err error
	if stop {
		err = b.StopReceiver(name)
	} else {
		err = b.StartReceiver(name)
	}
	if err != nil {
		return componentError(err)
	}
	c.a.log.Info("http api: receiver "+map[bool]string{true: "stopped", false: "started"}[stop], "receiver", name)
	ri, err := c.receiverInfo(b, name)
	if err != nil {
		return err
	}
	return c.json(ri)
}

func stopReceiver(c *call, b Console) error  { return c.control(b, true) }
func startReceiver(c *call, b Console) error { return c.control(b, false) }

// MappingEntry maps a KDB record id to a record type.
type MappingEntry struct {
	ID   int32  `json:"id"`
	Type string `json:"type"`
}

// Mapping is a KDB receiver's mapping file.
type Mapping struct {
	Receiver string `json:"receiver"`
	// Path is the mapping file ("": the default mapping of common
	// Kieker types, Default true).
	Path    string         `json:"path"`
	Default bool           `json:"default"`
	Entries []MappingEntry `json:"entries"`
	// Restarted: the receiver was restarted with it; otherwise it
	// applies when the receiver starts again.
	Restarted bool `json:"restarted"`
}

// MappingInput is the body of PUT …/mapping.
type MappingInput struct {
	Entries []MappingEntry `json:"entries"`
}

// receiverMapping returns a receiver's mapping key (its path, "" for the
// default) and whether its type takes one.
func receiverMapping(b Console, name string) (string, error) {
	typ, pc, ok, err := b.ReceiverConfig(name)
	if !ok {
		return "", errorf(http.StatusNotFound, "no receiver %s", name)
	}
	if err != nil {
		return "", err
	}
	if pc == nil {
		return "", errorf(http.StatusNotFound, "receiver %s: unknown type %s", name, typ)
	}
	v := reflect.ValueOf(pc)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if f, ok := fieldByKey(v, "mapping"); ok && f.Kind() == reflect.String {
		return f.String(), nil
	}
	return "", errorf(http.StatusBadRequest, "receiver %s (%s) takes no KDB mapping", name, typ)
}

// fieldByKey finds the field of a struct value with a YAML key,
// looking into inline structs.
func fieldByKey(v reflect.Value, key string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct {
			if fv, ok := fieldByKey(v.Field(i), key); ok {
				return fv, true
			}
			continue
		}
		if name == key && f.IsExported() {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func mappingOf(receiver, path string, m *kdb.Mapping) Mapping {
	out := Mapping{Receiver: receiver, Path: path, Default: path == "", Entries: []MappingEntry{}}
	for _, id := range m.IDs() {
		out.Entries = append(out.Entries, MappingEntry{id, m.Type(id).Name})
	}
	return out
}

func getMapping(c *call, b Console) error {
	name := c.str("name")
	path, err := receiverMapping(b, name)
	if err != nil {
		return err
	}
	m, err := mapping.Load(path, b.Catalog())
	if err != nil {
		return errorf(http.StatusConflict, "%v", err)
	}
	return c.json(mappingOf(name, path, m))
}

const maxMappingEntries = 65536

func putMapping(c *call, b Console) error {
	name := c.str("name")
	restart := c.bool("restart")
	if err := c.check(); err != nil {
		return err
	}
	path, err := receiverMapping(b, name)
	if err != nil {
		return err
	}
	var in MappingInput
	if err := c.decodeBody(&in); err != nil {
		return err
	}
	if len(in.Entries) == 0 || len(in.Entries) > maxMappingEntries {
		return errorf(http.StatusBadRequest, "entries: want 1 to %d", maxMappingEntries)
	}
	var text bytes.Buffer
	for _, e := range in.Entries {
		if strings.ContainsAny(e.Type, "\n\r=#") {
			return errorf(http.StatusBadRequest, "entries: id %d: type %q is not a record class name", e.ID, e.Type)
		}
		fmt.Fprintf(&text, "%d=%s\n", e.ID, e.Type)
	}
	m, err := kdb.ParseMapping("(request)", bytes.NewReader(text.Bytes()), b.Catalog())
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	configured := path != ""
	if !configured {
		path = filepath.Join(b.DataDir(), "mappings", safeFileName(name)+".map")
	}
	if err := writeFileAtomic(path, text.Bytes()); err != nil {
		return errorf(http.StatusInternalServerError, "saving the mapping: %v", err)
	}
	if !configured {
		abs, err := filepath.Abs(path)
		if err == nil {
			path = abs
		}
		if err := b.SetReceiverKey(name, "mapping", path); err != nil {
			return err
		}
	}
	c.a.log.Info("http api: mapping saved", "receiver", name, "path", path, "ids", m.Len())
	out := mappingOf(name, path, m)
	if restart {
		if ri, err := c.receiverInfo(b, name); err == nil && ri.State == "running" {
			if err := b.StopReceiver(name); err != nil {
				return componentError(err)
			}
			if err := b.StartReceiver(name); err != nil {
				return componentError(err)
			}
			out.Restarted = true
		}
	}
	return c.json(out)
}

// safeFileName keeps letters, digits, '.', '-' and '_' of a name.
func safeFileName(s string) string {
	out := []rune{}
	for _, r := range s {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			out = append(out, r)
		} else {
			out = append(out, '_')
		}
	}
	if len(out) == 0 {
		return "receiver"
	}
	return string(out)
}

// writeFileAtomic replaces path's contents in one rename.
func writeFileAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".mapping-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// ConfigKey describes a configuration key of a component type.
type ConfigKey struct {
	Name string `json:"name"`
	// Type: string, boolean, integer, number, duration (250ms, 7d),
	// size (2GiB), list (Items: the element type) or object (Keys).
	Type    string      `json:"type"`
	Items   string      `json:"items,omitempty"`
	Default any         `json:"default,omitempty"`
	Keys    []ConfigKey `json:"keys,omitempty"`
}

// ComponentType is a receiver, stage or sink type.
type ComponentType struct {
	Type    string   `json:"type"`
	Aliases []string `json:"aliases,omitempty"`
	// Policy is a sink type's delivery policy.
	Policy string      `json:"policy,omitempty"`
	Keys   []ConfigKey `json:"keys"`
}

// ComponentTypes are what the bridge can build.
type ComponentTypes struct {
	Receivers []ComponentType `json:"receivers"`
	Stages    []ComponentType `json:"stages"`
	Sinks     []ComponentType `json:"sinks"`
}

var (
	durationType = reflect.TypeFor[pipeline.Duration]()
	stdDuration  = reflect.TypeFor[time.Duration]()
	sizeType     = reflect.TypeFor[pipeline.ByteSize]()
)

// configKeys describes the YAML keys of a configuration struct.
func configKeys(t reflect.Type, v reflect.Value) []ConfigKey {
	out := []ConfigKey{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if v.IsValid() {
			if v.IsNil() {
				v = reflect.Value{}
			} else {
				v = v.Elem()
			}
		}
	}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		var fv reflect.Value
		if v.IsValid() {
			fv = v.Field(i)
		}
		if strings.Contains(opts, "inline") {
			out = append(out, configKeys(f.Type, fv)...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, configKey(name, f.Type, fv))
	}
	return out
}

func configKey(name string, t reflect.Type, v reflect.Value) ConfigKey {
	k := ConfigKey{Name: name, Type: kindOf(t)}
	switch k.Type {
	case "object":
		if t.Kind() == reflect.Struct || t.Kind() == reflect.Pointer {
			k.Keys = configKeys(t, v)
		}
	case "list":
		k.Items = kindOf(t.Elem())
	}
	if v.IsValid() && !v.IsZero() {
		switch k.Type {
		case "duration":
			k.Default = time.Duration(v.Int()).String()
		case "object":
		default:
			k.Default = v.Interface()
		}
	}
	return k
}

func kindOf(t reflect.Type) string {
	switch t {
	case durationType, stdDuration:
		return "duration"
	case sizeType:
		return "size"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "object"
	}
	return "string"
}

func typeOf(cfg pipeline.Config) []ConfigKey {
	return configKeys(reflect.TypeOf(cfg), reflect.ValueOf(cfg))
}

func componentTypes(c *call, b Console) error {
	f := b.Factories()
	out := ComponentTypes{Receivers: []ComponentType{}, Stages: []ComponentType{}, Sinks: []ComponentType{}}
	for _, r := range f.Receivers {
		out.Receivers = append(out.Receivers, ComponentType{Type: r.Type(), Aliases: r.Aliases(), Keys: typeOf(r.NewConfig())})
	}
	for _, s := range f.Stages {
		out.Stages = append(out.Stages, ComponentType{Type: s.Type(), Keys: typeOf(s.NewConfig())})
	}
	for _, s := range f.Sinks {
		out.Sinks = append(out.Sinks, ComponentType{Type: s.Type(), Policy: s.Policy().String(), Keys: typeOf(s.NewConfig())})
	}
	return c.json(out)
}

// RecordField is a field of a record type.
type RecordField struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Array bool   `json:"array,omitempty"`
}

// RecordType is a record type of the catalogue.
type RecordType struct {
	Name   string        `json:"name"`
	Fields []RecordField `json:"fields"`
}

// RecordTypes is the catalogue: the types by name and the legacy names
// that resolve to them.
type RecordTypes struct {
	Types   []RecordType      `json:"types"`
	Aliases map[string]string `json:"aliases"`
}

func recordTypes(c *call, b Console) error {
	cat := b.Catalog()
	out := RecordTypes{Types: []RecordType{}, Aliases: cat.Aliases()}
	for _, t := range cat.Types() {
		rt := RecordType{Name: t.Name, Fields: []RecordField{}}
		for _, f := range t.Fields {
			rt.Fields = append(rt.Fields, RecordField{f.Name, f.Kind.String(), f.Array})
		}
		out.Types = append(out.Types, rt)
	}
	return c.json(out)
}

func getConfig(c *call, b Console) error {
	y, err := b.Config()
	if err != nil {
		return err
	}
	c.w.Header().Set("Content-Disposition", `attachment; filename="tracebridge.yaml"`)
	return c.raw("application/yaml", y)
}

func healthz(c *call) error { return c.raw("text/plain; charset=utf-8", []byte("ok\n")) }

func readyz(c *call) error {
	if c.a.closed {
		return errClosed
	}
	var running time.Duration
	if e := c.a.opt.Counters; e != nil {
		_, running = e.Delivered()
	}
	if running <= 0 {
		return errorf(http.StatusServiceUnavailable, "starting")
	}
	return c.raw("text/plain; charset=utf-8", []byte("ready\n"))
}

func metricsHandler(a *API) http.Handler {
	if a.opt.Metrics == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, errorf(http.StatusServiceUnavailable, "no metrics registry"))
		})
	}
	return a.opt.Metrics.Handler()
}

// liveHandler mounts the live view a component published, refusing
// cross-origin WebSocket handshakes.
func liveHandler(a *API) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || !strings.EqualFold(u.Host, r.Host) {
				writeError(w, errorf(http.StatusForbidden, "cross-origin request refused"))
				return
			}
		}
		h := a.opt.Shared.Live()
		if h == nil {
			writeError(w, errorf(http.StatusServiceUnavailable, "no live view: this bridge has no stream sink publishing one (the live view is not configured)"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
