// Package jfrevents keeps a bounded window of each host's recent JFR
// events for the event browser (GET /api/v1/jfr/types, /api/v1/jfr/events
// and /api/v1/jfr/event): per host and event type a ring of the newest
// PerType events, at most PerHost events a host (the type holding the
// most gives up its oldest first), at most MaxHosts hosts (the one heard
// from least recently goes). Every event type a host sent is listed with
// its count since the bridge started, even when none is kept any more,
// and with the label, description, category and fields its recording's
// metadata gives (internal/codec/jfr.Describe). Records of other types
// (spans, Kieker records) are not kept.
//
// A kept event is a copy whose value slice is reused when its ring slot
// is taken again, so the steady state allocates only for array fields
// (stack traces: a list header each).
//
// Concurrency: Add runs on one goroutine (the profile stage's, the
// pipeline's drain goroutine); Types, Events and Event may be called from
// any goroutine at the same time.
package jfrevents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Defaults of Options.
const (
	DefaultPerType  = 1000
	DefaultPerHost  = 20_000
	DefaultMaxHosts = 64
	// MaxLimit bounds the events of one page.
	MaxLimit = 1000
	// maxTypes bounds the event types listed per host.
	maxTypes = 4096
)

// Options bound what a Keeper holds (zero: the defaults).
type Options struct {
	PerType, PerHost, MaxHosts int
}

// Keeper keeps the recent events of each host.
type Keeper struct {
	opt Options

	mu    sync.RWMutex
	hosts map[string]*host
	clock int64 // Add calls, for the least recently heard host

	infos map[*record.Type]*codec.TypeInfo // Add's cache (nil: not JFR)
}

type host struct {
	name  string
	types map[string]*typeEvents
	kept  int
	seq   int64 // events added: an event's id
	heard int64 // Keeper.clock when it was last added to
}

// typeEvents are one event type's events of a host.
type typeEvents struct {
	info  *codec.TypeInfo // of the newest event's type
	count int64           // events added since the start
	ring  []event         // the newest, oldest at head when full
	head  int
	n     int
}

type event struct {
	id  int64
	rec record.Record
}

// New returns an empty Keeper.
func New(opt Options) *Keeper {
	if opt.PerType <= 0 {
		opt.PerType = DefaultPerType
	}
	if opt.PerHost <= 0 {
		opt.PerHost = DefaultPerHost
	}
	if opt.MaxHosts <= 0 {
		opt.MaxHosts = DefaultMaxHosts
	}
	return &Keeper{opt: opt, hosts: map[string]*host{}, infos: map[*record.Type]*codec.TypeInfo{}}
}

// AddBatch keeps the JFR events of b (of its origin's host).
func (k *Keeper) AddBatch(b *record.Batch) {
	if b.Origin.Host == "" || len(b.Records) == 0 {
		return
	}
	locked := false
	for i := range b.Records {
		r := &b.Records[i]
		if k.info(r.Type) == nil {
			continue
		}
		if !locked {
			k.mu.Lock()
			locked = true
		}
		k.add(b.Origin.Host, r)
	}
	if locked {
		k.mu.Unlock()
	}
}

// Add keeps r (a JFR event of host; other records are left alone). r
// is copied: the caller keeps it.
func (k *Keeper) Add(hostName string, r *record.Record) {
	if k.info(r.Type) == nil || hostName == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.add(hostName, r)
}

// info returns the description of a JFR event type, nil for another
// type (Add's goroutine only).
func (k *Keeper) info(t *record.Type) *codec.TypeInfo {
	info, ok := k.infos[t]
	if !ok {
		info, _ = codec.Describe(t)
		k.infos[t] = info
	}
	return info
}

// add keeps r; k.mu is held.
func (k *Keeper) add(hostName string, r *record.Record) {
	info := k.infos[r.Type]
	k.clock++
	h := k.hosts[hostName]
	if h == nil {
		if len(k.hosts) >= k.opt.MaxHosts {
			k.dropLeastHeard()
		}
		h = &host{name: hostName, types: map[string]*typeEvents{}}
		k.hosts[hostName] = h
	}
	h.heard = k.clock
	te := h.types[r.Type.Name]
	if te == nil {
		if len(h.types) >= maxTypes {
			return
		}
		te = &typeEvents{}
		h.types[r.Type.Name] = te
	}
	te.info = info
	te.count++
	h.seq++
	var slot *event
	if te.n < k.opt.PerType {
		if te.n == len(te.ring) {
			if te.head != 0 {
				// Full but wrapped (it gave up its oldest to the host's
				// bound and filled again): put the oldest first, so
				// that the new slot follows the newest.
				slices.Reverse(te.ring[:te.head])
				slices.Reverse(te.ring[te.head:])
				slices.Reverse(te.ring)
				te.head = 0
			}
			te.ring = append(te.ring, event{})
		}
		slot = &te.ring[(te.head+te.n)%len(te.ring)]
		te.n++
		h.kept++
	} else {
		slot = &te.ring[te.head]
		te.head = (te.head + 1) % len(te.ring)
	}
	slot.id = h.seq
	copyRecord(&slot.rec, r)
	for h.kept > k.opt.PerHost {
		h.dropOldestOfLargest()
	}
}

// copyRecord copies src into dst, reusing dst's value slice and the
// lists it owns.
func copyRecord(dst, src *record.Record) {
	vals := dst.Values[:0]
	for i, v := range src.Values {
		if l := v.List(); l != nil {
			var own *record.List
			if i < len(dst.Values) {
				own = dst.Values[i].List() // read before vals overwrites it
			}
			if own != nil {
				own.Elem, own.Items = l.Elem, append(own.Items[:0], l.Items...)
				v = dst.Values[i]
			} else {
				v = record.ListValue(l.Elem, append([]record.Value(nil), l.Items...))
			}
		}
		vals = append(vals, v)
	}
	*dst = *src
	dst.Values = vals
}

// dropLeastHeard forgets the host added to least recently.
func (k *Keeper) dropLeastHeard() {
	var oldest *host
	for _, h := range k.hosts {
		if oldest == nil || h.heard < oldest.heard {
			oldest = h
		}
	}
	if oldest != nil {
		delete(k.hosts, oldest.name)
	}
}

// dropOldestOfLargest drops the oldest event of the type keeping the
// most.
func (h *host) dropOldestOfLargest() {
	var big *typeEvents
	for _, te := range h.types {
		if big == nil || te.n > big.n {
			big = te
		}
	}
	if big == nil || big.n == 0 {
		h.kept = 0
		return
	}
	// The slot keeps its values (out of sight) for its next event.
	big.head = (big.head + 1) % len(big.ring)
	big.n--
	h.kept--
}

// TypeCount is an event type of a host with its counts and description.
type TypeCount struct {
	*codec.TypeInfo
	// Count is the events of the type the host sent since the start.
	Count int64 `json:"count"`
	// Kept is how many of them the window holds now.
	Kept int `json:"kept"`
}

// Hosts returns the hosts with events, sorted.
func (k *Keeper) Hosts() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]string, 0, len(k.hosts))
	for name := range k.hosts {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Types returns the event types host sent, most events first; nil for
// a host without events.
func (k *Keeper) Types(_ context.Context, hostName string) []TypeCount {
	k.mu.RLock()
	defer k.mu.RUnlock()
	h := k.hosts[hostName]
	if h == nil {
		return nil
	}
	out := make([]TypeCount, 0, len(h.types))
	for _, te := range h.types {
		out = append(out, TypeCount{TypeInfo: te.info, Count: te.count, Kept: te.n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Filter is a condition on a field: Op is one of = != ~ (contains,
// case-insensitive) < <= > >=; numbers compare as numbers.
type Filter struct {
	Field, Op, Value string
}

// ParseFilter reads "field OP value" (for example "monitorClass~Lock",
// "duration>=1000000").
func ParseFilter(s string) (Filter, error) {
	for _, op := range []string{"!=", "<=", ">=", "=", "~", "<", ">"} {
		if i := strings.Index(s, op); i > 0 {
			return Filter{Field: strings.TrimSpace(s[:i]), Op: op, Value: s[i+len(op):]}, nil
		}
	}
	return Filter{}, fmt.Errorf("filter %q: want FIELD then one of = != ~ < <= > >= then a value", s)
}

// Query selects, sorts and pages events of one host and type.
type Query struct {
	Host, Type   string
	Since, Until int64 // unix ns; 0: unbounded
	// Thread keeps events whose own thread (the type's first thread
	// field: eventThread, sampledThread) contains it, case-insensitive.
	Thread  string
	Filters []Filter
	// Sort is a field name ("" or "startTime": by time); Asc sorts
	// ascending (default: descending, newest first).
	Sort   string
	Asc    bool
	Limit  int    // default 100, at most MaxLimit
	Cursor string // from the previous page
}

// Event is one event: its id in the host's window, time, and the
// values of its type's fields (Page.Fields) in order. Arrays are
// arrays of their items (a stack trace: frames, top first).
type Event struct {
	ID     int64  `json:"id"`
	Time   int64  `json:"time"`
	Thread string `json:"thread,omitempty"`
	Values []any  `json:"values"`
}

// Page is one page of the events a Query matches.
type Page struct {
	Total  int               `json:"total"`
	Type   *codec.TypeInfo   `json:"type"`
	Events []Event           `json:"events"`
	Cursor string            `json:"cursor,omitempty"`
	Fields []codec.FieldInfo `json:"-"`
}

// Errors of a query.
var (
	ErrNoHost = errors.New("no JFR events of this host")
	ErrNoType = errors.New("no events of this type")
	ErrQuery  = errors.New("bad query")
)

// Events answers q. Stack traces in a page are cut to their top
// MaxPageFrames frames (Event answers them whole).
func (k *Keeper) Events(_ context.Context, q Query) (*Page, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	q.Limit = min(q.Limit, MaxLimit)
	offset := 0
	if q.Cursor != "" {
		n, err := strconv.Atoi(q.Cursor)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: cursor %q", ErrQuery, q.Cursor)
		}
		offset = n
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	h := k.hosts[q.Host]
	if h == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoHost, q.Host)
	}
	te := h.types[q.Type]
	if te == nil {
		return nil, fmt.Errorf("%w: %s of host %s", ErrNoType, q.Type, q.Host)
	}
	m, err := newMatcher(te.info, q)
	if err != nil {
		return nil, err
	}
	var hits []*event
	for i := 0; i < te.n; i++ {
		e := &te.ring[(te.head+i)%len(te.ring)]
		if m.match(&e.rec) {
			hits = append(hits, e)
		}
	}
	m.sort(hits)
	p := &Page{Total: len(hits), Type: te.info, Events: []Event{}}
	if offset < len(hits) {
		end := min(offset+q.Limit, len(hits))
		for _, e := range hits[offset:end] {
			p.Events = append(p.Events, m.event(e, MaxPageFrames))
		}
		if end < len(hits) {
			p.Cursor = strconv.Itoa(end)
		}
	}
	return p, nil
}

// MaxPageFrames is how many frames of a stack trace a page shows.
const MaxPageFrames = 5

// Event returns one event of host by its id, its stack trace whole.
func (k *Keeper) Event(_ context.Context, hostName string, id int64) (*Page, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	h := k.hosts[hostName]
	if h == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoHost, hostName)
	}
	for _, te := range h.types {
		for i := 0; i < te.n; i++ {
			e := &te.ring[(te.head+i)%len(te.ring)]
			if e.id == id {
				m, _ := newMatcher(te.info, Query{})
				return &Page{Total: 1, Type: te.info, Events: []Event{m.event(e, -1)}}, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: event %d of host %s is not (or no longer) kept", ErrNoType, id, hostName)
}
