package stream

import (
	"slices"
	"sort"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/record"
)

// metaState is what the metadata says: the record types with their ids,
// the hosts, the receivers, the control settings. The sink's mutex
// guards it.
type metaState struct {
	m       streammsg.Metadata // Types, Hosts, Receivers are kept sorted by id / name
	byType  map[*record.Type]*typeState
	byName  map[string][]int // indexes into m.Types
	hosts   map[string]int   // index into m.Hosts
	recvs   map[string]bool
	added   streammsg.Change
	removed streammsg.Change
	dirty   bool // changed since the last metadata message
	seen    bool // last-seen times moved since then
}

// typeState is a type as the sink publishes it.
type typeState struct {
	id    uint32
	idx   int // in m.Types (byType is rebuilt when they move)
	token string
	host  int // index of a string field hostname, or -1
}

func newMetaState() *metaState {
	return &metaState{byType: map[*record.Type]*typeState{}, byName: map[string][]int{}, hosts: map[string]int{}, recvs: map[string]bool{}}
}

// load takes the types, hosts and counters of the repository's last
// metadata, so ids stay what old messages use.
func (s *metaState) load(old *streammsg.Metadata) {
	s.m.Version, s.m.Run, s.m.NextTypeID = old.Version, old.Run, old.NextTypeID
	s.m.Types = slices.Clone(old.Types)
	s.m.Hosts = slices.Clone(old.Hosts)
	for _, t := range s.m.Types {
		if t.ID >= s.m.NextTypeID {
			s.m.NextTypeID = t.ID + 1
		}
	}
	s.reindex()
}

func (s *metaState) reindex() {
	clear(s.byName)
	clear(s.hosts)
	clear(s.byType)
	for i, t := range s.m.Types {
		s.byName[t.Name] = append(s.byName[t.Name], i)
	}
	for i, h := range s.m.Hosts {
		s.hosts[h.Name] = i
	}
}

// typeOf returns the state of t, registering it (a new id, unless the
// repository knows the same type) the first time.
func (s *metaState) typeOf(t *record.Type, now int64) *typeState {
	if ts := s.byType[t]; ts != nil {
		return ts
	}
	idx := -1
	for _, i := range s.byName[t.Name] {
		if s.m.Types[i].Matches(t) {
			idx = i
			break
		}
	}
	if idx < 0 {
		if s.m.NextTypeID == 0 {
			s.m.NextTypeID = 1
		}
		ti := streammsg.NewTypeInfo(s.m.NextTypeID, t)
		ti.FirstSeen, ti.LastSeen = now, now
		s.m.NextTypeID++
		s.m.Types = append(s.m.Types, ti)
		idx = len(s.m.Types) - 1
		s.byName[t.Name] = append(s.byName[t.Name], idx)
		s.added.Types = append(s.added.Types, t.Name)
		s.dirty = true
	}
	ts := &typeState{id: s.m.Types[idx].ID, idx: idx, token: s.m.Types[idx].Token, host: -1}
	if j := t.FieldIndex("hostname"); j >= 0 && t.Fields[j].Kind == record.String && !t.Fields[j].Array {
		ts.host = j
	}
	s.byType[t] = ts
	return ts
}

// seenType notes a record of type ts at now.
func (s *metaState) seenType(ts *typeState, now int64) {
	if t := &s.m.Types[ts.idx]; t.LastSeen < now {
		t.LastSeen, s.seen = now, true
	}
}

// host notes host (from receiver) at now.
func (s *metaState) host(name, receiver string, now int64) {
	if i, ok := s.hosts[name]; ok {
		h := &s.m.Hosts[i]
		if h.LastSeen < now {
			h.LastSeen, s.seen = now, true
		}
		if receiver != "" && !slices.Contains(h.Receivers, receiver) {
			h.Receivers = append(h.Receivers, receiver)
			sort.Strings(h.Receivers)
			s.dirty = true
		}
		return
	}
	h := streammsg.HostInfo{Name: name, Token: streammsg.HostToken(name), FirstSeen: now, LastSeen: now}
	if receiver != "" {
		h.Receivers = []string{receiver}
	}
	s.m.Hosts = append(s.m.Hosts, h)
	s.hosts[name] = len(s.m.Hosts) - 1
	if name != "" {
		s.added.Hosts = append(s.added.Hosts, name)
	}
	s.dirty = true
}

// receiver notes a receiver that delivered.
func (s *metaState) receiver(name string) {
	if name == "" || s.recvs[name] {
		return
	}
	s.recvs[name] = true
	for _, r := range s.m.Receivers {
		if r.Name == name {
			return
		}
	}
	s.m.Receivers = append(s.m.Receivers, streammsg.ReceiverInfo{Name: name})
	s.added.Receivers = append(s.added.Receivers, name)
	s.dirty = true
}

// setReceivers describes the bridge's receivers.
func (s *metaState) setReceivers(rs []streammsg.ReceiverInfo) {
	for _, r := range rs {
		s.recvs[r.Name] = true
		if i := slices.IndexFunc(s.m.Receivers, func(x streammsg.ReceiverInfo) bool { return x.Name == r.Name }); i >= 0 {
			s.m.Receivers[i] = r
			continue
		}
		s.m.Receivers = append(s.m.Receivers, r)
		s.added.Receivers = append(s.added.Receivers, r.Name)
	}
	s.dirty = true
}

// control notes new control settings.
func (s *metaState) control(old, now streammsg.ControlState) {
	add, rm := now.Diff(&old)
	s.m.Control = now
	s.added.Control = append(s.added.Control, add...)
	s.removed.Control = append(s.removed.Control, rm...)
	s.dirty = true
}

// expire removes the types and hosts last seen before cutoff: the
// repository holds none of their records any more.
func (s *metaState) expire(cutoff int64) {
	n := 0
	for _, t := range s.m.Types {
		if t.LastSeen < cutoff {
			s.removed.Types = append(s.removed.Types, t.Name)
			continue
		}
		s.m.Types[n] = t
		n++
	}
	hn := 0
	for _, h := range s.m.Hosts {
		if h.LastSeen < cutoff {
			if h.Name != "" {
				s.removed.Hosts = append(s.removed.Hosts, h.Name)
			}
			continue
		}
		s.m.Hosts[hn] = h
		hn++
	}
	if n == len(s.m.Types) && hn == len(s.m.Hosts) {
		return
	}
	s.m.Types, s.m.Hosts = s.m.Types[:n], s.m.Hosts[:hn]
	s.reindex()
	s.dirty = true
}

// next makes the next metadata version: a copy to publish, with what
// changed since the previous one.
func (s *metaState) next(records, lost uint64) *streammsg.Metadata {
	s.m.Version++
	s.m.Time = time.Now().UnixNano()
	s.m.Records, s.m.Lost = records, lost
	s.m.Added, s.m.Removed = s.added, s.removed
	s.added, s.removed = streammsg.Change{}, streammsg.Change{}
	s.dirty, s.seen = false, false
	m := s.m
	m.Types = slices.Clone(s.m.Types)
	m.Hosts = slices.Clone(s.m.Hosts)
	for i := range m.Hosts {
		m.Hosts[i].Receivers = slices.Clone(m.Hosts[i].Receivers)
	}
	m.Receivers = slices.Clone(s.m.Receivers)
	m.Control = s.m.Control.Clone()
	// Lists are [] in JSON, never null, for scripts.
	nonNil(&m.Types)
	nonNil(&m.Hosts)
	nonNil(&m.Receivers)
	nonNil(&m.Control.DisabledTypes)
	nonNil(&m.Control.DisabledHosts)
	nonNil(&m.Control.Samples)
	return &m
}

// names returns the names of the known types.
func (s *metaState) names() []string {
	out := make([]string, 0, len(s.m.Types))
	for _, t := range s.m.Types {
		out = append(out, t.Name)
	}
	return out
}

func nonNil[T any](s *[]T) {
	if *s == nil {
		*s = []T{}
	}
}
