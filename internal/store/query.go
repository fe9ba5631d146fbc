package store

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tracebridge/tracebridge/internal/eql"
	"github.com/tracebridge/tracebridge/internal/store/block"
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
	// Name: the trace's name (trace.Trace.Name: a zorka trace's type,
	// else its root operation; case-insensitive).
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
	// Match: an expression (EQL) evaluated for the root span, or for every
	// span with deep (true when one matches).
	Match func(t *trace.Trace, deep bool) bool
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
	Host string `json:"host"`
	// Service is the root span's service ("" for Kieker's and zorka's
	// traces, which have hosts only).
	Service  string       `json:"service,omitempty"`
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

	root *trace.Span
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

// SetEQL makes q select the traces expression e matches (Match), narrowed
// by what e requires (eql.Hints: a minimum duration, errors, attribute
// pairs, a text), so that the indexes and the blocks' filters rule traces
// out before e is evaluated on each one left.
func (q *Query) SetEQL(e *eql.Expr) {
	q.Match = e.MatchTrace
	h := e.Hints()
	if d := time.Duration(h.MinDuration); d > q.MinDuration {
		q.MinDuration = d
	}
	q.Errors = q.Errors || h.Errors
	q.Attrs = append(q.Attrs, h.Attrs...)
	if q.Text == "" {
		q.Text = h.Text
	}
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
	prefixes := s.plan(&q)
	if len(prefixes) == 0 {
		return Page{}, nil
	}
	f := s.newFilter(&q)
	if f.needs && len(q.Hosts) == 0 && q.Name == "" && q.MinDuration == 0 && !q.Errors {
		return s.searchBlocks(&q, f, since, until, after)
	}
	m, err := s.newMerger(prefixes, since, until, !q.Oldest, after)
	if err != nil {
		return Page{}, err
	}
	defer m.close()

	start := time.Now()
	var page Page
	var last *cursorPos
	for {
		ref, pos, ok := m.next()
		if !ok {
			break
		}
		if (page.Scanned+1)%64 == 0 {
			// The cursor stays at the last trace looked at: this one
			// is read again by the next page.
			el := time.Since(start)
			if el > q.TotalBudget || len(page.Traces) > 0 && el > q.HitBudget {
				page.Partial, page.More = true, true
				break
			}
		}
		page.Scanned++
		last = &pos
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

// plan picks the time indexes to walk: for each partition (or each host
// asked for) the most selective index the query allows: by root name, by
// duration bucket, the error traces, or all of the host's traces.
func (s *Store) plan(q *Query) [][]byte {
	var parts []*partition
	if len(q.Hosts) == 0 {
		parts = s.partitions()
	} else {
		for _, h := range q.Hosts {
			s.pmu.RLock()
			p := s.byName[h]
			s.pmu.RUnlock()
			if p != nil {
				parts = append(parts, p)
			}
		}
	}
	var out [][]byte
	for _, p := range parts {
		switch {
		case q.Name != "" && len(q.Hosts) == 0:
			// Root names are indexed in the trace's own partition.
			p.smu.RLock()
			for i, n := range p.syms.names {
				if i > 0 && strings.EqualFold(n, q.Name) {
					out = append(out, namePrefix(p.id, uint32(i)))
				}
			}
			p.smu.RUnlock()
		case q.MinDuration > 0:
			have := p.buckets(s.db)
			for b := int(durBucket(int64(q.MinDuration))); b < 64; b++ {
				if have&(1<<b) != 0 {
					out = append(out, durPrefix(p.id, uint8(b)))
				}
			}
		case q.Errors:
			out = append(out, errPrefix(p.id))
		default:
			out = append(out, hostPrefix(p.id))
		}
	}
	return out
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
	db     *pebble.DB
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
	m := &merger{desc: desc, db: s.db}
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
		var ref Ref
		var ok bool
		if k[0] == kHost {
			ref, ok = unmarshalRef(id, it.Value())
		} else if m.have && id == m.lastID && st == m.lastSt {
			ok = true // a duplicate, skipped below
		} else {
			// A secondary index: the summary is in the host index.
			hk := keyHost(binary.BigEndian.Uint32(k[1:]), st, id)
			if v, c, err := m.db.Get(hk); err == nil {
				ref, ok = unmarshalRef(id, v)
				c.Close()
			}
		}
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
	values  [][]byte // attribute values, as they are in a block's bytes
	grams   []uint64 // text trigram hashes
	text    string   // lower-cased
	// textSyms says per partition whether a dictionary string holds the
	// text (then blocks that may use it are decoded).
	textSyms map[uint32]bool
	// blocks caches per block whether it may hold a match.
	blocks map[location]bool
	mu     sync.Mutex // guards textSyms and blocks (searches scan on several goroutines)
}

func (s *Store) newFilter(q *Query) *filter {
	f := &filter{s: s, q: q, name: map[uint32]int64{}, service: map[uint32]int64{}, textSyms: map[uint32]bool{}, blocks: map[location]bool{}}
	f.needs = len(q.Attrs) > 0 || q.Text != "" || q.Regex != nil || q.Match != nil
	for _, a := range q.Attrs {
		f.pairs = append(f.pairs, pairHash(a.Key, a.Value))
		switch a.Key {
		case "kieker.traceId", "kieker.orderIndex", "kieker.eoi", "kieker.ess":
			// Kieker's positions are numbers in a trace's bytes, not text.
		default:
			f.values = append(f.values, []byte(a.Value))
		}
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
	if f.needs {
		if pl, err := f.s.block(r.loc); err == nil && int(r.loc.idx) < len(pl.traces) && !f.traceMayMatch(r.loc.host, pl.traces[r.loc.idx]) {
			return Summary{}, false, nil
		}
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

// blockMayMatch says whether a block may hold a trace the span-level
// conditions select: its filter must hold every attribute pair, and the
// text must be in one of the host's dictionary strings the filter holds
// or in the block's bytes. The answer is kept per block.
func (f *filter) blockMayMatch(loc location) bool {
	key := location{host: loc.host, seg: loc.seg, off: loc.off}
	f.mu.Lock()
	v, ok := f.blocks[key]
	f.mu.Unlock()
	if ok {
		return v
	}
	v = f.blockCheck(key)
	f.mu.Lock()
	if len(f.blocks) > 1<<16 {
		clear(f.blocks)
	}
	f.blocks[key] = v
	f.mu.Unlock()
	return v
}

func (f *filter) blockCheck(loc location) bool {
	p := f.s.partitionByID(loc.host)
	if p == nil {
		return false
	}
	bf := p.filterOf(loc)
	for _, h := range f.pairs {
		if !bf.Has(h) {
			return false
		}
	}
	if f.q.Text == "" {
		return true
	}
	if f.symbolHolds(loc.host) {
		inFilter := true
		for _, h := range f.grams {
			inFilter = inFilter && bf.Has(h)
		}
		if inFilter {
			return true
		}
	}
	pl, err := f.s.block(loc)
	if err != nil {
		return true // read again (and reported) when the trace is read
	}
	for _, t := range pl.traces {
		if containsFold(t, f.text) {
			return true
		}
	}
	return false
}

// filterOf returns the bloom filter of the block at loc (nil: unknown).
func (p *partition) filterOf(loc location) *block.Bloom {
	p.bmu.RLock()
	defer p.bmu.RUnlock()
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
		return p.blocks[lo].filter
	}
	return nil
}

// symbolHolds says whether a dictionary string of the partition holds the
// text.
func (f *filter) symbolHolds(host uint32) bool {
	f.mu.Lock()
	v, ok := f.textSyms[host]
	f.mu.Unlock()
	if ok {
		return v
	}
	if p := f.s.partitionByID(host); p != nil {
		p.smu.RLock()
		for _, n := range p.syms.names {
			if strings.Contains(strings.ToLower(n), f.text) {
				v = true
				break
			}
		}
		p.smu.RUnlock()
	}
	f.mu.Lock()
	f.textSyms[host] = v
	f.mu.Unlock()
	return v
}

// traceMayMatch checks a trace's bytes before decoding it: every attribute
// value it asks for must be in them, and the text too unless a dictionary
// string may hold it.
func (f *filter) traceMayMatch(host uint32, body []byte) bool {
	for _, v := range f.values {
		if !bytes.Contains(body, v) {
			return false
		}
	}
	if f.q.Text != "" && !f.symbolHolds(host) && !containsFold(body, f.text) {
		return false
	}
	return true
}

// containsFold reports whether b holds the lower-case ASCII/UTF-8 text
// lower, ignoring ASCII case.
func containsFold(b []byte, lower string) bool {
	if lower == "" {
		return true
	}
	first := lower[0]
	up := first
	if 'a' <= first && first <= 'z' {
		up -= 'a' - 'A'
	}
	for i := 0; i+len(lower) <= len(b); i++ {
		if c := b[i]; c != first && c != up {
			j := bytes.IndexByte(b[i+1:], first)
			k := bytes.IndexByte(b[i+1:], up)
			if j < 0 && k < 0 {
				return false
			}
			switch {
			case j < 0:
				i += k
			case k < 0:
				i += j
			default:
				i += min(j, k)
			}
			continue
		}
		if equalFoldASCII(b[i:i+len(lower)], lower) {
			return true
		}
	}
	return false
}

func equalFoldASCII(b []byte, lower string) bool {
	for i := 0; i < len(lower); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
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
	if q.Match != nil && !q.Match(t, q.Deep) {
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
		sum.Name = t.Name()
		sum.Service = root.Service
		sum.Attrs = append(trace.KiekerAttrs(root), root.Attributes...)
		sum.root = root
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
		if t.root != nil {
			if a, ok := t.root.Attr(key); ok {
				v = a.Value
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

// searchBlocks answers a query with span-level conditions and no host
// filter by walking the blocks themselves, newest (or oldest) first, each
// checked by its filter and its bytes before a trace in it is decoded;
// the best Limit matches are kept in a heap, and the walk stops once no
// block left can hold a better one.
func (s *Store) searchBlocks(q *Query, f *filter, since, until int64, after *cursorPos) (Page, error) {
	var blocks []*blockMeta
	for _, p := range s.partitions() {
		p.bmu.RLock()
		for _, b := range p.blocks {
			// The attribute pairs' Bloom filter, here rather than on a
			// worker: most blocks fail it.
			if b.maxEnd >= since && b.minStart <= until && !b.before(after, q.Oldest) && b.filter.HasAll(f.pairs) {
				blocks = append(blocks, b)
			}
		}
		p.bmu.RUnlock()
	}
	desc := !q.Oldest
	slices.SortFunc(blocks, func(a, b *blockMeta) int {
		if desc {
			return cmp.Compare(b.maxEnd, a.maxEnd)
		}
		return cmp.Compare(a.minStart, b.minStart)
	})
	better := func(a, b cursorPos) bool { // a comes before b in the order asked for
		if a.start != b.start {
			return desc == (a.start > b.start)
		}
		if a.id.Hi != b.id.Hi {
			return desc == (a.id.Hi > b.id.Hi)
		}
		if a.id.Lo != b.id.Lo {
			return desc == (a.id.Lo > b.id.Lo)
		}
		return false // the same position is not before itself (oldest first repeated the cursor's trace)
	}
	h := &hitHeap{better: better}
	began := time.Now()
	var page Page
	overflow := false      // a match did not fit the page
	var stopped *cursorPos // where the budget stopped the scan

	// Blocks are read and decoded by a few workers (one per core), at
	// most that many ahead of the block the results are merged from.
	workers := max(runtime.GOMAXPROCS(0), 1)
	results := make([]chan blockHits, len(blocks))
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	defer close(stop)
	next := 0
	dispatch := func(upto int) {
		for ; next < len(blocks) && next < upto; next++ {
			ch := make(chan blockHits, 1)
			results[next] = ch
			b := blocks[next]
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-stop:
					ch <- blockHits{}
				default:
					ch <- s.scanBlock(b, f, since, until, after, better)
				}
			}()
		}
	}
	done := 0
	for i, b := range blocks {
		if h.Len() == q.Limit {
			worst := h.items[0].pos
			if desc && b.maxEnd < worst.start || !desc && b.minStart > worst.start {
				break
			}
		}
		if el := time.Since(began); el > q.TotalBudget || h.Len() > 0 && el > q.HitBudget {
			// Every trace of the blocks not read comes after bound.
			bound := cursorPos{start: b.maxEnd + 1}
			if !desc {
				bound = cursorPos{start: b.minStart - 1, id: trace.ID{Hi: math.MaxUint64, Lo: math.MaxUint64}}
			}
			// Stop only where the next page starts after this one's
			// cursor: each page moves on, however small the budget.
			if after == nil || better(*after, bound) {
				page.Partial = true
				stopped = &bound
				break
			}
		}
		dispatch(i + workers)
		res := <-results[i]
		done++
		page.Scanned += res.scanned
		for _, x := range res.hits {
			if h.Len() == q.Limit && !better(x.pos, h.items[0].pos) {
				overflow = true
				continue
			}
			heap.Push(h, x)
			if h.Len() > q.Limit {
				heap.Pop(h)
				overflow = true
			}
		}
	}
	hits := make([]hit, h.Len())
	for i := len(hits) - 1; i >= 0; i-- {
		hits[i] = heap.Pop(h).(hit)
	}
	if stopped != nil {
		// The budget ended the scan: blocks not read may hold traces
		// that come before some hits (blocks overlap in time). The page
		// keeps the hits before the first unread block's bound; the
		// cursor resumes at the last of them if the page is full, else at
		// the bound, so the next page neither skips nor repeats a trace.
		full := len(hits) == q.Limit
		n := 0
		for n < len(hits) && better(hits[n].pos, *stopped) {
			n++
		}
		page.More = true
		if full && n == len(hits) {
			page.Cursor = hits[n-1].pos.String(q.Oldest)
		} else {
			hits = hits[:n]
			page.Cursor = stopped.String(q.Oldest)
		}
	} else if (done < len(blocks) || overflow) && len(hits) > 0 {
		page.More = true
		page.Cursor = hits[len(hits)-1].pos.String(q.Oldest)
	}
	page.Traces = make([]Summary, len(hits))
	for i := range hits {
		page.Traces[i] = hits[i].sum
	}
	return page, nil
}

// before says whether every trace of b comes before the cursor after
// (nil: none does), so that a page continuing a search skips the blocks
// the earlier pages read.
func (b *blockMeta) before(after *cursorPos, oldest bool) bool {
	if after == nil {
		return false
	}
	if oldest {
		return b.maxEnd < after.start // every trace started before the cursor
	}
	return b.minStart > after.start
}

// blockHits are the matches a worker found in one block.
type blockHits struct {
	hits    []hit
	scanned int
}

// scanBlock returns the traces of block b that q selects (it may run on
// several goroutines at once).
func (s *Store) scanBlock(b *blockMeta, f *filter, since, until int64, after *cursorPos, better func(a, b cursorPos) bool) blockHits {
	var res blockHits
	loc := location{host: b.host, seg: b.seg, off: b.off}
	if !f.blockMayMatch(loc) {
		return res
	}
	pl, err := s.block(loc)
	if err != nil {
		s.opt.Logger.Warn("store: unreadable block skipped", "host", b.host, "segment", b.seg, "offset", b.off, "err", err)
		return res
	}
	p := s.partitionByID(b.host)
	if p == nil {
		return res
	}
	for i, body := range pl.traces {
		res.scanned++
		if !f.traceMayMatch(b.host, body) {
			continue
		}
		p.smu.RLock()
		t, err := decodeTrace(body, p.syms)
		p.smu.RUnlock()
		if err != nil {
			continue
		}
		st := t.Start()
		pos := cursorPos{start: st, id: t.ID}
		if st < since || st > until || after != nil && !better(*after, pos) {
			continue
		}
		r, _ := summarizeRef(t, location{host: b.host, seg: b.seg, off: b.off, idx: uint32(i)})
		if !f.summaryMatch(&r) || !f.namesMatch(t) || !f.spansMatch(t) {
			continue
		}
		res.hits = append(res.hits, hit{pos: pos, sum: s.summary(&r, t)})
	}
	return res
}

// summarizeRef returns the index entry a decoded trace would have.
func summarizeRef(t *trace.Trace, loc location) (Ref, []string) {
	r := Ref{ID: t.ID, loc: loc, Start: t.Start(), Duration: t.Duration(), Spans: len(t.Spans), Errors: t.Errors(), Broken: len(t.Broken) > 0}
	return r, nil
}

// summaryMatch applies the summary conditions (not names: a decoded trace
// is checked by spansMatch's caller with its strings) to r.
func (f *filter) summaryMatch(r *Ref) bool {
	q := f.q
	return r.Duration >= int64(q.MinDuration) && (q.MaxDuration <= 0 || r.Duration <= int64(q.MaxDuration)) && (!q.Errors || r.Errors > 0)
}

// namesMatch checks the root name and service of a decoded trace.
func (f *filter) namesMatch(t *trace.Trace) bool {
	q := f.q
	if q.Name != "" && !strings.EqualFold(t.Name(), q.Name) {
		return false
	}
	if q.Service != "" {
		found := false
		for i := range t.Spans {
			if t.Spans[i].Service == q.Service {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

type hit struct {
	pos cursorPos
	sum Summary
}

// hitHeap keeps the best hits with the worst on top.
type hitHeap struct {
	items  []hit
	better func(a, b cursorPos) bool
}

func (h *hitHeap) Len() int           { return len(h.items) }
func (h *hitHeap) Less(i, j int) bool { return h.better(h.items[j].pos, h.items[i].pos) }
func (h *hitHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *hitHeap) Push(x any)         { h.items = append(h.items, x.(hit)) }
func (h *hitHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
