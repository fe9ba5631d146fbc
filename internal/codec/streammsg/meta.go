package streammsg

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Metadata is the body of a metadata message (JSON): everything a
// subscriber needs to decode the records of the repository, and what the
// bridge receives and records. The bridge publishes a new version before
// the first record of a new type or host, when a control command changes
// what it records, when types or hosts leave the repository, and at
// start. The last version is retained; it describes every record the
// repository holds.
type Metadata struct {
	// Version counts the metadata messages of the repository (it goes on
	// across restarts of the bridge).
	Version uint64 `json:"version"`
	// Run counts the starts of the bridge on this repository.
	Run uint64 `json:"run"`
	// Time is when this version was made (Unix ns).
	Time int64 `json:"time"`
	// Bridge is the version of tracebridge.
	Bridge string `json:"bridge,omitempty"`
	// Encoding of the data messages: "binary" or "json".
	Encoding string `json:"encoding"`
	// Subjects and Streams name where things are.
	Subjects SubjectInfo `json:"subjects"`
	// Retention of the repository.
	Retention Retention `json:"retention"`
	// Types are the record types in the repository, by id.
	Types []TypeInfo `json:"types"`
	// Hosts are the monitored hosts whose records are in the repository.
	Hosts []HostInfo `json:"hosts"`
	// Receivers are the bridge's receivers.
	Receivers []ReceiverInfo `json:"receivers"`
	// Control is what the bridge records (remote control).
	Control ControlState `json:"control"`
	// Added and Removed say what changed since the previous version.
	Added   Change `json:"added"`
	Removed Change `json:"removed"`
	// Records and Lost count the records published in this run, and those
	// the bridge could not publish (the NATS server was unreachable
	// longer than its buffer lasted), as of this version.
	Records uint64 `json:"records"`
	Lost    uint64 `json:"lost"`
	// NextTypeID is the id the next new type gets.
	NextTypeID uint32 `json:"nextTypeId"`
	// Closed is set in the last metadata of a run that ended cleanly:
	// every message before it was published.
	Closed bool `json:"closed,omitempty"`
	// Unclosed lists the runs (the last MaxUnclosed) whose last metadata
	// was not Closed: the bridge was killed, or could not publish
	// everything when it stopped, so records it had taken may be
	// missing at the end of those runs, uncounted.
	Unclosed []uint64 `json:"unclosed,omitempty"`
	// Node is the cluster node whose metadata this is, empty for a bridge
	// that runs alone. In a cluster every node writes the one repository,
	// each with its own metadata (versions, runs, type ids, counts) on
	// PREFIX.meta.<node>, and its data messages carry NodeHeader.
	Node string `json:"node,omitempty"`
	// Nodes, in a view that joins the metadata of a cluster's nodes (the
	// stream package's MergeMetadata), are the nodes joined; never
	// published.
	Nodes []string `json:"nodes,omitempty"`
}

// MaxUnclosed bounds Metadata.Unclosed.
const MaxUnclosed = 64

// SubjectInfo names the subjects and streams of the repository.
type SubjectInfo struct {
	Records    string `json:"records"` // PREFIX.records.<host>.<type>
	Traces     string `json:"traces"`  // PREFIX.traces.<host>
	Meta       string `json:"meta"`
	Control    string `json:"control"`
	Stream     string `json:"stream"`
	MetaStream string `json:"metaStream"`
}

// NewSubjectInfo describes s.
func NewSubjectInfo(s Subjects) SubjectInfo {
	p := s.prefix()
	return SubjectInfo{
		Records: p + ".records.<host>.<type>", Traces: p + ".traces.<host>",
		Meta: s.Meta(), Control: s.Control(), Stream: s.Stream(), MetaStream: s.MetaStream(),
	}
}

// Retention is the repository's retention (0: unbounded).
type Retention struct {
	MaxAgeNs int64 `json:"maxAgeNs"`
	MaxBytes int64 `json:"maxBytes"`
}

// TypeInfo describes one record type.
type TypeInfo struct {
	ID     uint32      `json:"id"`
	Name   string      `json:"name"`
	Token  string      `json:"token"` // its subject token
	Fields []FieldInfo `json:"fields"`
	// FirstSeen and LastSeen: when the bridge first and last published a
	// record of the type (Unix ns).
	FirstSeen int64 `json:"firstSeen"`
	LastSeen  int64 `json:"lastSeen"`
}

// FieldInfo describes one field: its name and its kind (boolean, byte,
// short, int, long, float, double, char, string), Array for arrays.
type FieldInfo struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Array bool   `json:"array,omitempty"`
}

// HostInfo describes one monitored host.
type HostInfo struct {
	Name      string   `json:"name"`
	Token     string   `json:"token"`
	Receivers []string `json:"receivers"`
	FirstSeen int64    `json:"firstSeen"`
	LastSeen  int64    `json:"lastSeen"`
}

// ReceiverInfo describes one receiver of the bridge.
type ReceiverInfo struct {
	Name  string `json:"name"`
	Type  string `json:"type,omitempty"`
	Where string `json:"where,omitempty"`
}

// Change lists what was added or removed: type names, host names,
// receiver names, and control settings in the words of ControlState.
type Change struct {
	Types     []string `json:"types,omitempty"`
	Hosts     []string `json:"hosts,omitempty"`
	Receivers []string `json:"receivers,omitempty"`
	Control   []string `json:"control,omitempty"`
}

// Empty reports whether nothing changed.
func (c Change) Empty() bool {
	return len(c.Types) == 0 && len(c.Hosts) == 0 && len(c.Receivers) == 0 && len(c.Control) == 0
}

// ControlState is what remote control has set: records of disabled types
// and hosts are dropped before every sink, sampled types keep a share of
// their records (whole traces, where records carry a trace id), and the
// probe commands sent to monitored programs.
type ControlState struct {
	DisabledTypes []string `json:"disabledTypes"`
	DisabledHosts []string `json:"disabledHosts"`
	Samples       []Sample `json:"samples"`
	// Probes are the probe (de)activations sent, last per host and
	// pattern.
	Probes []Probe `json:"probes,omitempty"`
	// Changes counts the changes ever made; Changed is when the last was
	// (Unix ns).
	Changes uint64 `json:"changes"`
	Changed int64  `json:"changed,omitempty"`
}

// Sample keeps Rate (0 < Rate < 1) of the records of Type.
type Sample struct {
	Type string  `json:"type"`
	Rate float64 `json:"rate"`
}

// Probe is a probe (de)activation sent to a monitored program: a Kieker
// remote-control record to the program's TCP controller.
type Probe struct {
	Host    string `json:"host"`
	Pattern string `json:"pattern"`
	Active  bool   `json:"active"`
	// Sent says to how many controllers it went; Error why not to all.
	Sent  int    `json:"sent"`
	Error string `json:"error,omitempty"`
}

// Words lists the settings as "disable TYPE", "disable host:H",
// "sample TYPE RATE" (for Change.Control).
func (c *ControlState) Words() []string {
	var out []string
	for _, t := range c.DisabledTypes {
		out = append(out, "disable "+t)
	}
	for _, h := range c.DisabledHosts {
		out = append(out, "disable host:"+h)
	}
	for _, s := range c.Samples {
		out = append(out, "sample "+s.Type+" "+strconv.FormatFloat(s.Rate, 'g', -1, 64))
	}
	for _, p := range c.Probes {
		op := "deactivate"
		if p.Active {
			op = "activate"
		}
		out = append(out, "probe "+op+" "+p.Pattern+" host:"+p.Host)
	}
	return out
}

// Diff returns the settings of c missing from old (added) and those of
// old missing from c (removed).
func (c *ControlState) Diff(old *ControlState) (added, removed []string) {
	now, was := c.Words(), old.Words()
	for _, w := range now {
		if !slices.Contains(was, w) {
			added = append(added, w)
		}
	}
	for _, w := range was {
		if !slices.Contains(now, w) {
			removed = append(removed, w)
		}
	}
	return added, removed
}

// Clone returns a deep copy.
func (c *ControlState) Clone() ControlState {
	return ControlState{
		DisabledTypes: slices.Clone(c.DisabledTypes), DisabledHosts: slices.Clone(c.DisabledHosts),
		Samples: slices.Clone(c.Samples), Probes: slices.Clone(c.Probes), Changes: c.Changes, Changed: c.Changed,
	}
}

// NewTypeInfo describes t under id.
func NewTypeInfo(id uint32, t *record.Type) TypeInfo {
	ti := TypeInfo{ID: id, Name: t.Name, Token: EscapeToken(t.Name), Fields: make([]FieldInfo, len(t.Fields))}
	for i, f := range t.Fields {
		ti.Fields[i] = FieldInfo{Name: f.Name, Kind: f.Kind.String(), Array: f.Array}
	}
	return ti
}

// Matches reports whether ti describes t (name and fields).
func (ti *TypeInfo) Matches(t *record.Type) bool {
	if ti.Name != t.Name || len(ti.Fields) != len(t.Fields) {
		return false
	}
	for i, f := range t.Fields {
		if ti.Fields[i].Name != f.Name || ti.Fields[i].Kind != f.Kind.String() || ti.Fields[i].Array != f.Array {
			return false
		}
	}
	return true
}

// Type builds the record type ti describes; the type of cat with the
// same name and fields when cat has one (cat may be nil).
func (ti *TypeInfo) Type(cat *record.Catalog) (*record.Type, error) {
	if cat != nil {
		if t := cat.Lookup(ti.Name); t != nil && t.Name == ti.Name && ti.Matches(t) {
			return t, nil
		}
	}
	fields := make([]record.Field, len(ti.Fields))
	for i, f := range ti.Fields {
		k, ok := record.ParseKind(f.Kind)
		if !ok {
			return nil, fmt.Errorf("metadata: type %s: field %s has kind %q", ti.Name, f.Name, f.Kind)
		}
		fields[i] = record.Field{Name: f.Name, Kind: k, Array: f.Array}
	}
	t, err := record.NewType(ti.Name, fields...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return t, nil
}

// MarshalMetadata returns m as JSON.
func MarshalMetadata(m *Metadata) ([]byte, error) { return json.Marshal(m) }

// UnmarshalMetadata parses a metadata message.
func UnmarshalMetadata(b []byte) (*Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("metadata message: %w", err)
	}
	if m.Version == 0 {
		return nil, fmt.Errorf("metadata message: no version")
	}
	return &m, nil
}

// The control operations.
const (
	OpStatus  = "status"
	OpEnable  = "enable"
	OpDisable = "disable"
	OpSample  = "sample"
	OpProbe   = "probe"
)

// ControlRequest is a control command (JSON), sent as a NATS request to
// the control subject; the token, when the bridge wants one, travels in
// the TokenHeader header.
type ControlRequest struct {
	// Op is status, enable, disable, sample or probe.
	Op string `json:"op"`
	// Type (a full or a short class name) or Host names what enable and
	// disable act on; sample acts on Type.
	Type string `json:"type,omitempty"`
	Host string `json:"host,omitempty"`
	// Rate is sample's share of records to keep (0 < Rate ≤ 1; 1 ends
	// sampling).
	Rate float64 `json:"rate,omitempty"`
	// Pattern and Active: probe's Kieker probe pattern and whether to
	// activate it; Host limits it to one host's controllers.
	Pattern string `json:"pattern,omitempty"`
	Active  bool   `json:"active,omitempty"`
}

// ControlReply answers a ControlRequest.
type ControlReply struct {
	OK      bool          `json:"ok"`
	Error   string        `json:"error,omitempty"`
	Message string        `json:"message,omitempty"`
	Control *ControlState `json:"control,omitempty"`
}

// TokenHeader is the NATS header that carries a control token.
const TokenHeader = "Tracebridge-Token"

// NodeHeader is the NATS header of every message a cluster node publishes
// into the repository (data, traces, metadata): the node's name, which
// says whose metadata describes a data message and whose counts its run,
// ordinal and subject ordinal are. A bridge that runs alone sets none.
const NodeHeader = "Tracebridge-Node"
