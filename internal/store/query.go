package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// Query selects traces. Zero fields do not filter.
type Query struct {
	// Hosts: traces with a span on any of these hosts.
	Hosts []string
	// Since and Until bound the trace's start (unix ns; 0: unbounded).
	Since, Until int64
	// MinDuration (≥) and MaxDuration (≤; 0: none).
	MinDuration, MaxDuration time.Duration
	// Errors: traces with a span in error.
	Errors bool
	// Name: the trace type, its root operation (case-insensitive).
	Name string
	// Service: traces with a span of this service.
	Service string
	// Attrs: traces with, for each pair, a span that has the attribute
	// with exactly this value.
	Attrs []trace.Attr
	// Text: a case-insensitive substring of operation and class names,
	// attribute keys and values, exception class and message.
	Text string
	// Regex: the same strings matched by a regular expression.
	Regex *regexp.Regexp
	// Match: an expression (EQL) evaluated for spans.
	Match func(t *trace.Trace, s *trace.Span) bool
	// Deep: Text, Regex and Match look at every span, not just the root.
	Deep bool
	// Oldest lists the oldest first (default: newest first).
	Oldest bool
	// Limit: at most this many traces (default 20).
	Limit int
	// Cursor resumes a search where the page that returned it ended.
	Cursor string
	// HitBudget: stop after this long once there is a hit (default 2 s);
	// TotalBudget: stop after this long in any case (default 5 s).
	HitBudget, TotalBudget time.Duration
}

// Summary describes a trace found.
type Summary struct {
	Host     string       `json:"host"`
	ID       trace.ID     `json:"-"`
	TraceID  string       `json:"traceId"`
	Start    int64        `json:"start"`
	Duration int64        `json:"durationNs"`
	Name     string       `json:"name"`
	Spans    int          `json:"spans"`
	Errors   int          `json:"errors"`
	Error    bool         `json:"error"`
	Broken   bool         `json:"broken,omitempty"`
	Attrs    []trace.Attr `json:"-"`
}

// Page is one page of results.
type Page struct {
	Traces []Summary
	// More: there may be more traces; Cursor resumes after this page.
	More   bool
	Cursor string
	// Partial: the time budget ended the search before it reached the
	// end of the range.
	Partial bool
	// Scanned counts the index entries looked at.
	Scanned int
}

// ErrBadCursor is returned for a cursor this store did not make.
var ErrBadCursor = errors.New("bad cursor")

// Search returns a page of the traces q selects.
func (s *Store) Search(q Query) (Page, error) {
	if q.Limit <= 0 {
		q.Limit = 20
	}
	if q.HitBudget <= 0 {
		q.HitBudget = 2 * time.Second
	}
	if q.TotalBudget <= 0 {
		q.TotalBudget = 5 * time.Second
	}
	since, until := q.Since, q.Until
	if until == 0 {
		until = math.MaxInt64
	}
	if since == 0 {
		since = math.MinInt64
	}
	var after *cursorPos
	if q.Cursor != "" {
		c, err := parseCursor(q.Cursor)
		if err != nil {
			return Page{}, err
		}
		after = &c
	}
	// The time indexes to walk: the global one, or one per host.
	var prefixes [][]byte
	if len(q.Hosts) == 0 {
		prefixes = [][]byte{{kTime}}
	} else {
		for _, h := range q.Hosts {
			s.pmu.RLock()
			p := s.byName[h]
			s.pmu.RUnlock()
			if p == nil {
				continue
			}
			prefixes = append(prefixes, binary.BigEndian.AppendUint32([]byte{kHost}, p.id))
		}
		if len(prefixes) == 0 {
			return Page{}, nil
		}
	}
	m, err := s.newMerger(prefixes, since, until, !q.Oldest, after)
	if err != nil {
		return Page{}, err
	}
	defer m.close()

	f := s.newFilter(&q)
	start := time.Now()
	var page Page
	var last *cursorPos
	for {
		ref, pos, ok := m.next()
		if !ok {
			break
		}
		page.Scanned++
		last = &pos
		if page.Scanned%64 == 0 {
			el := time.Since(start)
			if el > q.TotalBudget || len(page.Traces) > 0 && el > q.HitBudget {
				page.Partial, page.More = true, true
				break
			}
		}
		sum, match, err := f.match(&ref)
		if err != nil {
			return page, err
		}
		if !match {
			continue
		}
		page.Traces = append(page.Traces, sum)
		if len(page.Traces) == q.Limit {
			page.More = m.peek()
			break
		}
	}
	if m.err != nil {
		return page, m.err
	}
	if page.More && last != nil {
		page.Cursor = last.String(q.Oldest)
	}
	return page, nil
}

// cursorPos is a position in a time index: the start and id of the last
// trace looked at.
type cursorPos struct {
	start int64
	id    trace.ID
}

func (c cursorPos) String(oldest bool) string {
	b := make([]byte, 0, 26)
	b = append(b, 'c')
	if oldest {
		b = append(b, 'o')
	} else {
		b = append(b, 'n')
	}
	b = binary.BigEndian.AppendUint64(b, uint64(c.start))
	b = binary.BigEndian.AppendUint64(b, c.id.Hi)
	b = binary.BigEndian.AppendUint64(b, c.id.Lo)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseCursor(s string) (cursorPos, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 26 || b[0] != 'c' {
		return cursorPos{}, ErrBadCursor
	}
	return cursorPos{start: int64(binary.BigEndian.Uint64(b[2:])), id: trace.ID{Hi: binary.BigEndian.Uint64(b[10:]), Lo: binary.BigEndian.Uint64(b[18:])}}, nil
}

// merger walks several time indexes in time order, once per trace.
type merger struct {
	its    []*pebble.Iterator
	prefix [][]byte
	ok     []bool
	desc   bool
	lastID trace.ID
	lastSt int64
	have   bool
	err    error
}

func (s *Store) newMerger(prefixes [][]byte, since, until int64, desc bool, after *cursorPos) (*merger, error) {
	m := &merger{desc: desc}
	for _, p := range prefixes {
		lo, hi := timeRange(p, since, until)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			m.close()
			return nil, err
		}
		var ok bool
		switch {
		case after != nil && desc:
			k := append(binary.BigEndian.AppendUint64(append([]byte(nil), p...), timeKey(after.start)), idBytes(after.id)...)
			ok = it.SeekLT(k)
		case after != nil:
			k := append(binary.BigEndian.AppendUint64(append([]byte(nil), p...), timeKey(after.start)), idBytes(after.id)...)
			ok = it.SeekGE(append(k, 0))
		case desc:
			ok = it.Last()
		default:
			ok = it.First()
		}
		m.its = append(m.its, it)
		m.prefix = append(m.prefix, p)
		m.ok = append(m.ok, ok)
	}
	return m, nil
}

func idBytes(id trace.ID) []byte {
	b := binary.BigEndian.AppendUint64(nil, id.Hi)
	return binary.BigEndian.AppendUint64(b, id.Lo)
}

// best returns the iterator whose key comes next, or -1.
func (m *merger) best() int {
	bi := -1
	var bk []byte
	for i, it := range m.its {
		if !m.ok[i] {
			continue
		}
		k := it.Key()[len(m.prefix[i]):]
		if bi < 0 || m.desc && bytes.Compare(k, bk) > 0 || !m.desc && bytes.Compare(k, bk) < 0 {
			bi, bk = i, k
		}
	}
	return bi
}

func (m *merger) next() (Ref, cursorPos, bool) {
	for {
		i := m.best()
		if i < 0 {
			return Ref{}, cursorPos{}, false
		}
		it := m.its[i]
		k := it.Key()
		id := idFromKey(k)
		st := startFromKey(k)
		ref, ok := unmarshalRef(id, it.Value())
		if m.desc {
			m.ok[i] = it.Prev()
		} else {
			m.ok[i] = it.Next()
		}
		if m.have && id == m.lastID && st == m.lastSt {
			continue // the same trace under another host
		}
		m.have, m.lastID, m.lastSt = true, id, st
		if !ok {
			m.err = fmt.Errorf("store: corrupt index entry of trace %s", id)
			return Ref{}, cursorPos{}, false
		}
		ref.Start = st
		return ref, cursorPos{start: st, id: id}, true
	}
}

// peek reports whether another trace follows.
func (m *merger) peek() bool { return m.best() >= 0 }

func (m *merger) close() {
	for _, it := range m.its {
		it.Close()
	}
}

// filter applies a query to index entries, reading traces only when it
// must (and only blocks whose filter may match).
type filter struct {
	s       *Store
	q       *Query
	name    map[uint32]int64 // per partition: the symbol of q.Name (-1: none)
	service map[uint32]int64
	needs   bool     // span-level conditions
	pairs   []uint64 // attribute pair hashes
	grams   []uint64 // text trigram hashes
	text    string   // lower-cased
}

func (s *Store) newFilter(q *Query) *filter {
	f := &filter{s: s, q: q, name: map[uint32]int64{}, service: map[uint32]int64{}}
	f.needs = len(q.Attrs) > 0 || q.Text != "" || q.Regex != nil || q.Match != nil
	for _, a := range q.Attrs {
		f.pairs = append(f.pairs, pairHash(a.Key, a.Value))
	}
	if q.Text != "" {
		f.text = strings.ToLower(q.Text)
		trigrams(q.Text, func(h uint64) { f.grams = append(f.grams, h) })
	}
	return f
}

// symbolOf returns the symbol of name in partition host (case-insensitive
// when fold), or -1.
func (f *filter) symbolOf(cache map[uint32]int64, host uint32, name string, fold bool) int64 {
	if v, ok := cache[host]; ok {
		return v
	}
	v := int64(-1)
	if p := f.s.partitionByID(host); p != nil {
		p.smu.RLock()
		if id, ok := p.syms.byName[name]; ok {
			v = int64(id)
		} else if fold {
			for i, n := range p.syms.names {
				if strings.EqualFold(n, name) {
					v = int64(i)
					break
				}
			}
		}
		p.smu.RUnlock()
	}
	cache[host] = v
	return v
}

func (f *filter) match(r *Ref) (Summary, bool, error) {
	q := f.q
	if r.Duration < int64(q.MinDuration) || q.MaxDuration > 0 && r.Duration > int64(q.MaxDuration) {
		return Summary{}, false, nil
	}
	if q.Errors && r.Errors == 0 {
		return Summary{}, false, nil
	}
	if q.Name != "" {
		if sym := f.symbolOf(f.name, r.loc.host, q.Name, true); sym < 0 || uint32(sym) != r.name {
			return Summary{}, false, nil
		}
	}
	if q.Service != "" {
		sym := f.symbolOf(f.service, r.loc.host, q.Service, false)
		found := false
		for _, sv := range r.services {
			found = found || int64(sv) == sym
		}
		if !found {
			return Summary{}, false, nil
		}
	}
	if f.needs && !f.blockMayMatch(r.loc) {
		return Summary{}, false, nil
	}
	t, err := f.s.read(r.loc)
	if err != nil {
		// A corrupt block: report it, keep searching the rest.
		f.s.opt.Logger.Warn("store: unreadable trace skipped", "trace_id", r.ID.String(), "err", err)
		return Summary{}, false, nil
	}
	if f.needs && !f.spansMatch(t) {
		return Summary{}, false, nil
	}
	return f.s.summary(r, t), true, nil
}

// blockMayMatch consults the block's filter.
func (f *filter) blockMayMatch(loc location) bool {
	p := f.s.partitionByID(loc.host)
	if p == nil {
		return false
	}
	p.bmu.RLock()
	defer p.bmu.RUnlock()
	var bf *bloom
	// Blocks are in (segment, offset) order: binary search.
	lo, hi := 0, len(p.blocks)
	for lo < hi {
		mid := (lo + hi) / 2
		b := p.blocks[mid]
		if b.seg < loc.seg || b.seg == loc.seg && b.off < loc.off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(p.blocks) && p.blocks[lo].seg == loc.seg && p.blocks[lo].off == loc.off {
		bf = p.blocks[lo].filter
	}
	if bf == nil {
		return true
	}
	for _, h := range f.pairs {
		if !bf.has(h) {
			return false
		}
	}
	for _, h := range f.grams {
		if !bf.has(h) {
			return false
		}
	}
	return true
}

func (f *filter) spansMatch(t *trace.Trace) bool {
	q := f.q
	for _, want := range q.Attrs {
		found := false
		for i := range t.Spans {
			if a, ok := t.Spans[i].Attr(want.Key); ok && a.Value == want.Value {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	spans := t.Spans
	if !q.Deep {
		if r := t.Root(); r != nil {
			spans = spans[:0:0]
			spans = append(spans, *r)
		}
	}
	if q.Text != "" && !anySpan(spans, func(s *trace.Span) bool {
		hit := false
		textOf(s, func(str string) { hit = hit || strings.Contains(strings.ToLower(str), f.text) })
		return hit
	}) {
		return false
	}
	if q.Regex != nil && !anySpan(spans, func(s *trace.Span) bool {
		hit := false
		textOf(s, func(str string) { hit = hit || q.Regex.MatchString(str) })
		return hit
	}) {
		return false
	}
	if q.Match != nil && !anySpan(spans, func(s *trace.Span) bool { return q.Match(t, s) }) {
		return false
	}
	return true
}

func anySpan(spans []trace.Span, f func(*trace.Span) bool) bool {
	for i := range spans {
		if f(&spans[i]) {
			return true
		}
	}
	return false
}

// summary describes a trace found.
func (s *Store) summary(r *Ref, t *trace.Trace) Summary {
	sum := Summary{ID: r.ID, TraceID: r.ID.String(), Start: r.Start, Duration: r.Duration, Spans: r.Spans, Errors: r.Errors, Error: r.Errors > 0, Broken: r.Broken}
	if p := s.partitionByID(r.loc.host); p != nil {
		sum.Host = p.name
	}
	if root := t.Root(); root != nil {
		sum.Name = root.Operation
		sum.Attrs = root.Attributes
	}
	return sum
}

// Count returns the number of traces in the store (an index scan).
func (s *Store) Count() (int, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kTrace}, UpperBound: []byte{kTrace + 1}})
	if err != nil {
		return 0, err
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	return n, it.Close()
}

// PivotRow is one group of a pivot: the traces whose root has the
// attribute value Value (or lacks the attribute: Value "").
type PivotRow struct {
	Value  string `json:"value"`
	Calls  int    `json:"calls"`
	Errors int    `json:"errors"`
	Sum    int64  `json:"sumNs"`
	Min    int64  `json:"minNs"`
	Max    int64  `json:"maxNs"`
}

// Pivot groups the traces q selects (every one in its time range, within
// its time budget; Limit and Cursor are ignored) by the value of their
// root span's attribute key: calls, errors, sum, min and max duration
// (zico's statistics view). partial says the budget ended it early.
func (s *Store) Pivot(q Query, key string) (rows []PivotRow, partial bool, err error) {
	q.Limit = math.MaxInt32
	q.Cursor = ""
	if q.TotalBudget <= 0 {
		q.TotalBudget = 5 * time.Second
	}
	q.HitBudget = q.TotalBudget
	page, err := s.Search(q)
	if err != nil {
		return nil, false, err
	}
	idx := map[string]int{}
	for _, t := range page.Traces {
		v := ""
		for _, a := range t.Attrs {
			if a.Key == key {
				v = a.Value
				break
			}
		}
		i, ok := idx[v]
		if !ok {
			i = len(rows)
			idx[v] = i
			rows = append(rows, PivotRow{Value: v, Min: t.Duration, Max: t.Duration})
		}
		r := &rows[i]
		r.Calls++
		if t.Error {
			r.Errors++
		}
		r.Sum += t.Duration
		r.Min = min(r.Min, t.Duration)
		r.Max = max(r.Max, t.Duration)
	}
	slices.SortFunc(rows, func(a, b PivotRow) int { return cmpRows(a, b) })
	return rows, page.Partial, nil
}

func cmpRows(a, b PivotRow) int {
	switch {
	case a.Sum != b.Sum:
		if a.Sum > b.Sum {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Value, b.Value)
}
