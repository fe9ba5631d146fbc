package store

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

	// attrTests: the attribute comparisons an EQL expression requires
	// (eql.Hints.AttrTests), tried on a block's terms.
	attrTests []eql.AttrTest
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
	// Scanned counts the traces looked at.
	Scanned int
}

// SetEQL makes q select the traces expression e matches (Match), narrowed
// by what e requires (eql.Hints: a minimum duration, errors, attribute
// pairs, a text), so that the summaries and the blocks' filters rule
// traces out before e is evaluated on each one left.
func (q *Query) SetEQL(e *eql.Expr) {
	q.Match = e.MatchTrace
	h := e.Hints()
	if d := time.Duration(h.MinDuration); d > q.MinDuration {
		q.MinDuration = d
	}
	q.Errors = q.Errors || h.Errors
	q.Attrs = append(q.Attrs, h.Attrs...)
	q.attrTests = append(q.attrTests, h.AttrTests...)
	if q.Text == "" {
		q.Text = h.Text
	}
}

// ErrBadCursor is returned for a cursor this store did not make.
var ErrBadCursor = errors.New("bad cursor")

// cursorPos is a position in the search order: the start and id of the
// last trace looked at.
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

// view is a snapshot of what a search reads of one head or block: its
// rows, its dictionary, and how to reach a row's body.
type view struct {
	p    *partition
	h    *head     // a head, or
	b    *blockRef // a block
	bi   *blockIndex
	desc string // for errors: the block or the write-ahead file
	// release, when set, lets go of h, an evicted head's index read
	// back for this view (Store.view): a scan drops it once done (its
	// hits keep the view to read their bodies, not the rows).
	release func()

	rows rowList
	// order, when set, lists rows by start, then trace id (a head's rows,
	// in arrival order, have none).
	order   []uint32
	dict    []string
	byName  func(string) (uint32, bool)
	body    func(ctx context.Context, row *block.Summary) ([]byte, error)
	pairsOK func(f *filter) bool
}

// headView snapshots a head (the partition's read lock is held).
func (s *Store) headView(p *partition, h *head) *view {
	n := len(h.syms.names)
	names := h.syms.names[:n:n]
	chunks := h.chunks[:len(h.chunks):len(h.chunks)]
	// The pending bodies' buffer takes the next ones once they are in a
	// chunk: the view reads a copy.
	bodies, ends := bytes.Clone(h.bodies), slices.Clone(h.bodyEnds)
	v := &view{p: p, h: h, desc: h.path, rows: h.rows.snapshot(), dict: names}
	byName := make(map[string]uint32, n)
	for i, name := range names {
		byName[name] = uint32(i)
	}
	v.byName = func(name string) (uint32, bool) { id, ok := byName[name]; return id, ok }
	hv := &head{id: h.id, path: h.path, chunks: chunks, bodies: bodies, bodyEnds: ends}
	v.body = func(_ context.Context, row *block.Summary) ([]byte, error) { return s.headBody(hv, row) }
	v.pairsOK = func(f *filter) bool {
		p.mu.RLock()
		defer p.mu.RUnlock()
		if h.evicted {
			return true // since the view was made: its rows are read
		}
		for i, x := range f.pairs {
			if !h.filter.pairs.has(x) && !h.filter.hasSmall(f.q.Attrs[i].Key, f.q.Attrs[i].Value) {
				return false
			}
		}
		return true
	}
	return v
}

// blockView reads a block's index (cached) into a view.
func (s *Store) blockView(ctx context.Context, p *partition, b *blockRef) (*view, error) {
	bi, err := s.index(ctx, b)
	if err != nil {
		return nil, err
	}
	v := &view{p: p, b: b, bi: bi, desc: b.key, rows: blockRows(bi.rows), order: bi.byStart, dict: bi.dict}
	v.byName = func(name string) (uint32, bool) { id, ok := bi.byName[name]; return id, ok }
	v.body = func(ctx context.Context, row *block.Summary) ([]byte, error) {
		bodies, err := s.page(ctx, b, bi, int(row.Page))
		if err != nil {
			return nil, err
		}
		if int(row.Index) >= len(bodies) {
			return nil, errors.New("store: block " + b.key + ": a row beyond its page")
		}
		return bodies[row.Index], nil
	}
	v.pairsOK = func(f *filter) bool { return bi.attrs.HasAll(f.pairs) }
	return v, nil
}

// decode decodes a body of the view.
func (v *view) decode(body []byte) (*trace.Trace, error) {
	return decodeTrace(body, &symbols{names: v.dict})
}

// filter applies a query to rows, reading traces only when it must.
type filter struct {
	s      *Store
	q      *Query
	needs  bool     // span-level conditions
	pairs  []uint64 // attribute pair hashes
	values [][]byte // attribute values, as they are in a trace's bytes
	text   string   // lower-cased
	// textBytes: the text is ASCII, so a trace's bytes must hold it
	// (ignoring ASCII case); a text with other letters is not looked for
	// in the bytes (its capitals there are other bytes).
	textBytes bool
	// lit: what every string Regex matches holds (its literal prefix).
	lit []byte
}

func (s *Store) newFilter(q *Query) *filter {
	f := &filter{s: s, q: q}
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
		f.textBytes = !strings.ContainsFunc(f.text, func(r rune) bool { return r >= 0x80 })
	}
	if q.Regex != nil {
		if lit, _ := q.Regex.LiteralPrefix(); lit != "" {
			f.lit = []byte(lit)
		}
	}
	return f
}

// metaMayMatch rules a block out by its meta.
func (f *filter) metaMayMatch(p *partition, m *block.Meta) bool {
	q := f.q
	if q.Errors && m.ErrorTraces == 0 || m.MaxDuration < int64(q.MinDuration) {
		return false
	}
	if len(q.Hosts) > 0 && !slices.Contains(q.Hosts, p.host) && !slices.ContainsFunc(m.Hosts, func(h string) bool { return slices.Contains(q.Hosts, h) }) {
		return false
	}
	// A list at the catalogue's bound may lack names: it rules nothing
	// out.
	if q.Service != "" && len(m.Services) < CatalogMaxNames && !slices.ContainsFunc(m.Services, func(sv block.MetaService) bool { return sv.Name == q.Service && sv.ViaService }) {
		return false
	}
	if q.Name != "" && len(m.Names) < CatalogMaxNames && !slices.ContainsFunc(m.Names, func(n string) bool { return strings.EqualFold(n, q.Name) }) {
		return false
	}
	return true
}

// headMayMatch is metaMayMatch for an evicted head: what its block's
// meta will hold is in memory (its catalogue, hosts, errors, longest
// trace), and mostly its attribute filter, so a search skips it without
// reading its index back (p.mu held).
func (f *filter) headMayMatch(p *partition, h *head) bool {
	if h.attrs != nil && !h.attrs.HasAll(f.pairs) {
		return false
	}
	var m block.Meta
	h.fillMeta(&m)
	return f.metaMayMatch(p, &m)
}

// rowFilter is a query resolved against one view's dictionary.
type rowFilter struct {
	f       *filter
	v       *view
	none    bool // nothing in the view can match
	names   []uint32
	service uint32
	hosts   []uint32
	ownHost bool // the partition's host is asked for: rows without hosts match
	// textInDict: a dictionary string holds the text.
	textInDict bool
	// litInDict: a dictionary string holds the regex's literal prefix.
	litInDict bool
	blockOK   bool // the view's filter may hold the attribute pairs
	// cand, when set, holds the rows (a bit each, by index row) that the
	// block's term index says may match: the others hold no wanted
	// attribute pair, text or regex match.
	cand []uint64
	// gone: the view's block was found gone from the bucket (Store.vanished).
	gone bool
}

// candidates lists the rows of cand (nil when every row may match).
func (rf *rowFilter) candidates() []uint32 {
	if rf.cand == nil {
		return nil
	}
	out := []uint32{}
	for w, word := range rf.cand {
		for ; word != 0; word &= word - 1 {
			out = append(out, uint32(w*64+bits.TrailingZeros64(word)))
		}
	}
	return out
}

// candidate reports whether row ri may match by the term index.
func (rf *rowFilter) candidate(ri uint32) bool {
	return rf.cand == nil || rf.cand[ri/64]&(1<<(ri%64)) != 0
}

// useTerms narrows rf to the rows of a block that its term index lists
// under every attribute pair asked for, and, unless a dictionary string
// (an operation, a class, an attribute key) may hold them, under a value
// that holds the text and one that the regex matches (a value kept
// truncated may hold anything). A block without a term index (version 2)
// or whose index does not read is left to its pages.
func (s *Store) useTerms(ctx context.Context, rf *rowFilter) {
	f, v := rf.f, rf.v
	if rf.none || !f.needs {
		return
	}
	q := f.q
	attrs := slices.ContainsFunc(q.Attrs, func(a trace.Attr) bool { return !strings.HasPrefix(a.Key, "kieker.") })
	tests := slices.ContainsFunc(q.attrTests, func(a eql.AttrTest) bool { return !strings.HasPrefix(a.Key, "kieker.") })
	if v.h != nil {
		if attrs {
			headCandidates(rf)
		}
		return
	}
	if !attrs && !tests && (q.Text == "" || rf.textInDict) && q.Regex == nil {
		return
	}
	tm, err := s.terms(ctx, v.b, v.bi)
	if s.vanished(v.b, err) {
		rf.none, rf.gone = true, true
		return
	}
	if err != nil {
		s.readFault("store: unreadable term index (the block's pages are read instead)", "in", v.desc, "err", err)
		return
	}
	if tm == nil {
		return
	}
	n := v.rows.len()
	var cand []uint64
	words := (n + 63) / 64
	and := func(set []uint64) {
		if cand == nil {
			cand = set
			return
		}
		for i := range cand {
			cand[i] &= set[i]
		}
	}
	add := func(set []uint64, i int) {
		tm.Rows(i, func(r uint32) { set[r/64] |= 1 << (r % 64) })
	}
	for _, a := range q.Attrs {
		if strings.HasPrefix(a.Key, "kieker.") {
			continue // Kieker's positions and session are not in the term index
		}
		i, ok := tm.Lookup(a.Key, a.Value)
		if !ok {
			rf.none = true
			return
		}
		set := make([]uint64, words)
		add(set, i)
		and(set)
	}
	for _, a := range q.attrTests {
		if strings.HasPrefix(a.Key, "kieker.") {
			continue
		}
		first, next := tm.Key(a.Key)
		set, hit := make([]uint64, words), false
		for i := first; i < next; i++ {
			if val, trunc := tm.Value(i); trunc || a.Test(string(val)) {
				add(set, i)
				hit = true
			}
		}
		if !hit {
			rf.none = true
			return
		}
		and(set)
	}
	if q.Text != "" && !rf.textInDict {
		set, hit := make([]uint64, words), false
		for i := range tm.Len() {
			if val, trunc := tm.Value(i); trunc || textHolds(val, f.text) {
				add(set, i)
				hit = true
			}
		}
		if !hit {
			rf.none = true
			return
		}
		and(set)
	}
	if q.Regex != nil && !slices.ContainsFunc(v.dict, q.Regex.MatchString) {
		set, hit := make([]uint64, words), false
		for i := range tm.Len() {
			val, trunc := tm.Value(i)
			if trunc || (f.lit == nil || bytes.Contains(val, f.lit)) && q.Regex.Match(val) {
				add(set, i)
				hit = true
			}
		}
		if !hit {
			rf.none = true
			return
		}
		and(set)
	}
	if cand != nil && !slices.ContainsFunc(cand, func(w uint64) bool { return w != 0 }) {
		rf.none = true
		return
	}
	rf.cand = cand
}

// headCandidates narrows rf to the rows of a head that its term index
// lists under every attribute pair asked for.
func headCandidates(rf *rowFilter) {
	v := rf.v
	v.p.mu.RLock()
	defer v.p.mu.RUnlock()
	if v.h.filter.terms == nil || v.h.evicted {
		return // (evicted since the view was made: its rows are read)
	}
	var cand []uint64
	for _, a := range rf.f.q.Attrs {
		if strings.HasPrefix(a.Key, "kieker.") {
			continue
		}
		set, ok := v.h.filter.rowsOf(pairHash(a.Key, a.Value), v.rows.len())
		if !ok {
			continue // the head's index is full: the pair may be in any row
		}
		if set == nil {
			rf.none = true
			return
		}
		if cand == nil {
			cand = set
			continue
		}
		for i := range cand {
			cand[i] &= set[i]
		}
	}
	rf.cand = cand
}

// textHolds reports whether val holds the lower-cased text, ignoring case
// as the search's check of a span's strings does (strings.ToLower).
func textHolds(val []byte, lower string) bool {
	for _, c := range val {
		if c >= 0x80 {
			return strings.Contains(strings.ToLower(string(val)), lower)
		}
	}
	return containsFold(val, lower)
}

func (f *filter) resolve(v *view) *rowFilter {
	q := f.q
	rf := &rowFilter{f: f, v: v}
	if q.Name != "" {
		for i, n := range v.dict {
			if strings.EqualFold(n, q.Name) {
				rf.names = append(rf.names, uint32(i))
			}
		}
		if len(rf.names) == 0 {
			rf.none = true
		}
	}
	if q.Service != "" {
		id, ok := v.byName(q.Service)
		if !ok {
			rf.none = true
		}
		rf.service = id
	}
	if len(q.Hosts) > 0 {
		rf.ownHost = slices.Contains(q.Hosts, v.p.host)
		for _, h := range q.Hosts {
			if id, ok := v.byName(h); ok {
				rf.hosts = append(rf.hosts, id)
			}
		}
		if len(rf.hosts) == 0 && !rf.ownHost {
			rf.none = true
		}
	}
	if f.needs {
		rf.blockOK = v.pairsOK(f)
		if !rf.blockOK {
			rf.none = true
		}
		if q.Text != "" {
			for _, n := range v.dict {
				if strings.Contains(strings.ToLower(n), f.text) {
					rf.textInDict = true
					break
				}
			}
		}
		if f.lit != nil {
			lit := string(f.lit)
			rf.litInDict = slices.ContainsFunc(v.dict, func(n string) bool { return strings.Contains(n, lit) })
		}
	}
	return rf
}

// rowMatch applies the summary conditions to a row.
func (rf *rowFilter) rowMatch(r *block.Summary) bool {
	q := rf.f.q
	if r.Duration < int64(q.MinDuration) || q.MaxDuration > 0 && r.Duration > int64(q.MaxDuration) {
		return false
	}
	if q.Errors && r.Errors == 0 {
		return false
	}
	if len(rf.names) > 0 && !slices.Contains(rf.names, r.Name) {
		return false
	}
	if q.Service != "" && !slices.Contains(r.Services, rf.service) {
		return false
	}
	if len(q.Hosts) > 0 {
		if len(r.Hosts) == 0 {
			return rf.ownHost
		}
		hit := false
		for _, h := range r.Hosts {
			hit = hit || slices.Contains(rf.hosts, h)
		}
		if !hit {
			return false
		}
	}
	return true
}

// bodyMayMatch checks a trace's bytes before decoding it: every attribute
// value it asks for must be in them, and the text and the regex's literal
// prefix too unless a dictionary string may hold them.
func (rf *rowFilter) bodyMayMatch(body []byte) bool {
	f := rf.f
	for _, v := range f.values {
		if !bytes.Contains(body, v) {
			return false
		}
	}
	if f.q.Text != "" && !rf.textInDict && f.textBytes && !containsFold(body, f.text) {
		return false
	}
	if f.lit != nil && !rf.litInDict && !bytes.Contains(body, f.lit) {
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

// unit is a head or a block a search may read, with its time range.
type unit struct {
	p        *partition
	h        *head
	b        *blockRef
	minStart int64
	maxEnd   int64
}

// units lists the heads and blocks that may hold what f selects in
// [since, until].
func (s *Store) units(f *filter, since, until int64) []unit {
	var out []unit
	for _, p := range s.partitions() {
		p.mu.RLock()
		for _, h := range append(slices.Clip(p.sealed), p.head) {
			if h != nil && h.count() > 0 && h.maxEnd >= since && h.minStart <= until && (!h.evicted || f.headMayMatch(p, h)) {
				out = append(out, unit{p: p, h: h, minStart: h.minStart, maxEnd: h.maxEnd})
			}
		}
		for _, b := range p.blocks {
			m := b.meta
			if m.Traces > 0 && m.MaxEnd >= since && m.MinStart <= until && f.metaMayMatch(p, m) {
				out = append(out, unit{p: p, b: b, minStart: m.MinStart, maxEnd: m.MaxEnd})
			}
		}
		p.mu.RUnlock()
	}
	return out
}

// view returns a unit's view.
func (s *Store) view(ctx context.Context, u unit) (*view, error) {
	if u.h != nil {
		u.p.mu.RLock()
		if !u.h.evicted {
			defer u.p.mu.RUnlock()
			return s.headView(u.p, u.h), nil
		}
		traces, off := u.h.traces, u.h.off
		u.p.mu.RUnlock()
		// A cut head whose index is in its file only: the view reads it
		// back, and holds it while the scan does.
		r, release, err := s.readEvicted(ctx, u.h, traces, off)
		if err != nil {
			return nil, err
		}
		v := s.headView(u.p, r)
		v.release = release
		return v, nil
	}
	return s.blockView(ctx, u.p, u.b)
}

type hit struct {
	pos cursorPos
	v   *view
	row block.Summary
	t   *trace.Trace // decoded already, or nil
	// merge: the trace was found in other rows too (parts, or copies in
	// blocks of two nodes): its summary is of every part merged.
	merge bool
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

type unitHits struct {
	hits    []hit
	scanned int
	// cut: the unit's walk stopped before its last row (it had enough,
	// or the rows left came after the worst hit kept).
	cut bool
}

// scanState is what the units of one search share: the worst hit kept
// once there are Limit (nil before), for walks to stop at.
type scanState struct {
	worst atomic.Pointer[cursorPos]
	limit int
	desc  bool
	// gone: a block was found gone from the bucket (deleted by retention
	// or a compaction elsewhere) while the search read it.
	gone atomic.Bool
}

// Search returns a page of the traces q selects, newest (or oldest)
// first: the heads and blocks that may hold them are read in that order
// (their rows checked against the summary conditions, their filters and
// bytes before a trace is decoded); the best Limit matches are kept, and
// the walk stops once no unit left can hold a better one. A trace stored
// in parts is listed once, with the summary of all its parts; so is a
// trace stored twice (in a cluster, by two nodes), its spans once each. A
// block found gone from the bucket meanwhile (deleted elsewhere) is
// skipped, and the search made again over a new listing (at most
// goneRetries times).
func (s *Store) Search(q Query) (Page, error) {
	s.refresh()
	page, gone, err := s.search(q)
	for try := 0; err == nil && gone && try < goneRetries; try++ {
		if s.relistAfterGone(try) != nil {
			break
		}
		page, gone, err = s.search(q)
	}
	return page, err
}

// relistAfterGone lists the bucket again after the try-th read that found
// a block gone: in a shared bucket first the announcements (a compaction
// elsewhere, the usual cause, announced the block that replaced it; a
// block retention deleted is simply out of the list now), then every
// block.
func (s *Store) relistAfterGone(try int) error {
	if try == 0 && s.opt.Node != "" {
		return s.relistAnnounced()
	}
	_, err := s.relist(time.Now())
	return err
}

// goneRetries bounds how often a search or lookup is made again because a
// block went while it read (the blocks a compaction replaced stay for
// uploadedGrace: one more is nearly always enough).
const goneRetries = 3

// search is Search; gone says a block was found gone while it read.
func (s *Store) search(q Query) (_ Page, gone bool, _ error) {
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
			return Page{}, false, err
		}
		after = &c
	}
	if q.Service != "" && len(q.Hosts) == 0 {
		// A service as Jaeger and the catalogue name them (ServiceOf): a
		// name only hosts of spans without a service have (a Kieker or
		// zorka host) selects the traces of that host.
		if viaService, viaHost, ok := s.ServiceSource(q.Service); ok && viaHost && !viaService {
			q.Hosts, q.Service = []string{q.Service}, ""
		}
	}
	f := s.newFilter(&q)
	desc := !q.Oldest
	units := s.units(f, since, until)
	units = slices.DeleteFunc(units, func(u unit) bool {
		if after == nil {
			return false
		}
		if desc {
			return u.minStart > after.start
		}
		return u.maxEnd < after.start
	})
	slices.SortFunc(units, func(a, b unit) int {
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
		return false
	}
	h := &hitHeap{better: better}
	began := time.Now()
	ctx, cancel := context.WithTimeout(s.ctx, q.TotalBudget+30*time.Second)
	defer cancel()
	var page Page
	overflow := false
	var stopped *cursorPos
	// seen: 1 for the ids in the heap (a trace in parts is listed once),
	// 2 for those found but not kept.
	seen := map[trace.ID]uint8{}
	// multi: ids found in more than one row (parts, or copies): their
	// summaries are of the merged trace.
	var multi map[trace.ID]bool
	st := &scanState{limit: q.Limit, desc: desc}

	workers := max(runtime.GOMAXPROCS(0), 1)
	results := make([]chan unitHits, len(units))
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	defer close(stop)
	next := 0
	dispatch := func(upto int) {
		for ; next < len(units) && next < upto; next++ {
			ch := make(chan unitHits, 1)
			results[next] = ch
			u := units[next]
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-stop:
					ch <- unitHits{}
				default:
					ch <- s.scanUnit(ctx, u, f, st, since, until, after, better)
				}
			}()
		}
	}
	done := 0
	for i, u := range units {
		if h.Len() == q.Limit {
			worst := h.items[0].pos
			if desc && u.maxEnd < worst.start || !desc && u.minStart > worst.start {
				break
			}
		}
		if el := time.Since(began); el > q.TotalBudget || h.Len() > 0 && el > q.HitBudget {
			bound := cursorPos{start: u.maxEnd + 1}
			if !desc {
				bound = cursorPos{start: u.minStart - 1, id: trace.ID{Hi: math.MaxUint64, Lo: math.MaxUint64}}
			}
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
		overflow = overflow || res.cut
		for _, x := range res.hits {
			was := seen[x.row.ID]
			if was != 0 {
				if multi == nil {
					multi = map[trace.ID]bool{}
				}
				multi[x.row.ID] = true
			}
			if was == 1 {
				// Another part of a trace already found: keep the better
				// position.
				idx := slices.IndexFunc(h.items, func(y hit) bool { return y.row.ID == x.row.ID })
				if idx >= 0 && better(x.pos, h.items[idx].pos) {
					h.items[idx] = x
					heap.Fix(h, idx)
				}
				continue
			}
			if h.Len() == q.Limit && !better(x.pos, h.items[0].pos) {
				overflow = true
				seen[x.row.ID] = 2
				continue
			}
			heap.Push(h, x)
			seen[x.row.ID] = 1
			if h.Len() > q.Limit {
				y := heap.Pop(h).(hit)
				seen[y.row.ID] = 2
				overflow = true
			}
		}
		if h.Len() == q.Limit {
			w := h.items[0].pos
			st.worst.Store(&w)
		}
	}
	hits := make([]hit, h.Len())
	for i := len(hits) - 1; i >= 0; i-- {
		hits[i] = heap.Pop(h).(hit)
		hits[i].merge = multi[hits[i].row.ID]
	}
	if stopped != nil {
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
	} else if (done < len(units) || overflow) && len(hits) > 0 {
		page.More = true
		page.Cursor = hits[len(hits)-1].pos.String(q.Oldest)
	}
	// The hits' summaries, on as many goroutines as the scan (each may
	// decompress a page).
	sums := make([]Summary, len(hits))
	errs := make([]error, len(hits))
	var next2 atomic.Int64
	var swg sync.WaitGroup
	for range min(workers, len(hits)) {
		swg.Add(1)
		go func() {
			defer swg.Done()
			for i := int(next2.Add(1) - 1); i < len(hits); i = int(next2.Add(1) - 1) {
				sums[i], errs[i] = s.summaryOf(ctx, &hits[i])
			}
		}()
	}
	swg.Wait()
	page.Traces = make([]Summary, 0, len(hits))
	gone = st.gone.Load()
	for i := range hits {
		if s.vanished(hits[i].v.b, errs[i]) {
			gone = true
			continue
		}
		if errs[i] != nil {
			s.readFault("store: unreadable trace skipped", "trace_id", hits[i].row.ID.String(), "in", hits[i].v.desc, "err", errs[i])
			continue
		}
		page.Traces = append(page.Traces, sums[i])
	}
	return page, gone, nil
}

// scanUnit returns the traces of a unit that the query selects (it runs on
// several goroutines at once). A block's rows are walked in the order
// asked for, and the walk stops at the Limit-th distinct trace or at the
// first row after the worst hit the search keeps: the unit's best Limit
// traces are all the search can use of it (a trace it ranks lower has
// Limit better ones in this unit alone).
func (s *Store) scanUnit(ctx context.Context, u unit, f *filter, st *scanState, since, until int64, after *cursorPos, better func(a, b cursorPos) bool) unitHits {
	var res unitHits
	v, err := s.view(ctx, u)
	if s.vanished(u.b, err) {
		st.gone.Store(true)
		return res
	}
	if err != nil {
		s.opt.Logger.Warn("store: unreadable block skipped", "host", u.p.host, "err", err)
		return res
	}
	if v.release != nil {
		defer func() {
			v.rows, v.h, v.pairsOK = rowList{}, nil, nil
			v.release()
		}()
	}
	rf := f.resolve(v)
	defer func() {
		if rf.gone {
			st.gone.Store(true)
		}
	}()
	s.useTerms(ctx, rf)
	if rf.none {
		return res
	}
	n := v.rows.len()
	if v.order == nil {
		for i := range v.rows.len() {
			if !rf.candidate(uint32(i)) {
				res.scanned++
				continue
			}
			s.scanRow(ctx, v, v.rows.at(i), rf, &res, since, until, after, better)
		}
		return res
	}
	// The rows in the order asked for: k-th of n is order[k] oldest first,
	// order[n-1-k] newest first. Rows before the cursor or out of the
	// time range are skipped by a binary search.
	idx := func(k int) uint32 {
		if st.desc {
			return v.order[n-1-k]
		}
		return v.order[k]
	}
	at := func(k int) *block.Summary { return v.rows.at(int(idx(k))) }
	k := 0
	if after != nil {
		k = sortSearch(n, func(k int) bool { r := at(k); return better(*after, cursorPos{start: r.Start, id: r.ID}) })
	}
	if st.desc && until != math.MaxInt64 {
		k = max(k, sortSearch(n, func(k int) bool { return at(k).Start <= until }))
	} else if !st.desc && since != math.MinInt64 {
		k = max(k, sortSearch(n, func(k int) bool { return at(k).Start >= since }))
	}
	// Span-level conditions are evaluated a page at a time (each page
	// decompressed once however the walk jumps between them): verdict
	// holds each row's (0: not yet, 1: a hit, 2: not), traces the hits'.
	var verdict []uint8
	var traces map[uint32]*trace.Trace
	if f.needs {
		verdict = make([]uint8, n)
		traces = map[uint32]*trace.Trace{}
	}
	// When the term index leaves few rows, the walk visits just those,
	// in the same order (the time range and cursor are tested on each).
	walk, end := idx, n
	if cands := rf.candidates(); cands != nil && len(cands)*4 < n {
		slices.SortFunc(cands, func(a, b uint32) int {
			x, y := v.rows.at(int(a)), v.rows.at(int(b))
			c := cmp.Or(cmp.Compare(x.Start, y.Start), cmp.Compare(x.ID.Hi, y.ID.Hi), cmp.Compare(x.ID.Lo, y.ID.Lo))
			if st.desc {
				return -c
			}
			return c
		})
		walk, end, k = func(k int) uint32 { return cands[k] }, len(cands), 0
		s.prefetch(ctx, v, rf, st, cands, since, until, after, better)
	}
	distinct := 0
	for ; k < end; k++ {
		ri := walk(k)
		r := v.rows.at(int(ri))
		if st.desc && r.Start < since || !st.desc && r.Start > until {
			break
		}
		if w := st.worst.Load(); w != nil && !better(cursorPos{start: r.Start, id: r.ID}, *w) || st.limit <= maxEarlyStop && distinct == st.limit {
			// More only if a row left may match: without span
			// conditions, the rows say whether one does.
			res.cut = f.needs
			for ; !res.cut && k < n; k++ {
				r := at(k)
				res.cut = rf.rowOK(r, since, until, after, better) && !slices.ContainsFunc(res.hits, func(x hit) bool { return x.row.ID == r.ID })
			}
			break
		}
		before := len(res.hits)
		if !f.needs {
			s.scanRow(ctx, v, r, rf, &res, since, until, after, better)
		} else {
			res.scanned++
			if !rf.candidate(ri) || !rf.rowOK(r, since, until, after, better) {
				continue
			}
			if verdict[ri] == 0 {
				s.evalPage(ctx, v, rf, r.Page, verdict, traces, since, until, after, better)
			}
			if verdict[ri] == 1 {
				res.hits = append(res.hits, hit{pos: cursorPos{start: r.Start, id: r.ID}, v: v, row: *r, t: traces[ri]})
			}
		}
		if st.limit <= maxEarlyStop && len(res.hits) > before && !slices.ContainsFunc(res.hits[:before], func(x hit) bool { return x.row.ID == r.ID }) {
			distinct++
		}
	}
	return res
}

// prefetch reads at once the pages of the first candidates a walk will
// test (up to the limit, at most prefetchPages pages, 4 at a time): a
// bucket answers several requests in the time of one, where the walk
// would wait for each page in turn. The walk then finds them cached (a
// page that did not read is read again by the walk, which reports it).
func (s *Store) prefetch(ctx context.Context, v *view, rf *rowFilter, st *scanState, cands []uint32, since, until int64, after *cursorPos, better func(a, b cursorPos) bool) {
	var pages []uint32
	w := st.worst.Load()
	for _, ri := range cands {
		if len(pages) == min(st.limit, prefetchPages) {
			break
		}
		r := v.rows.at(int(ri))
		if w != nil && !better(cursorPos{start: r.Start, id: r.ID}, *w) {
			break
		}
		if rf.rowOK(r, since, until, after, better) && !slices.Contains(pages, r.Page) {
			pages = append(pages, r.Page)
		}
	}
	if len(pages) < 2 {
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, pg := range pages {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, _ = s.page(ctx, v.b, v.bi, int(pg)) // a page that fails is read again by the walk, which reports it
		}()
	}
	wg.Wait()
}

// prefetchPages bounds the pages a walk reads ahead.
const prefetchPages = 8

// evalPage applies the span-level conditions to the rows of a block's
// page that pass the summary conditions.
func (s *Store) evalPage(ctx context.Context, v *view, rf *rowFilter, page uint32, verdict []uint8, traces map[uint32]*trace.Trace, since, until int64, after *cursorPos, better func(a, b cursorPos) bool) {
	rows := v.bi.byPage[v.bi.pageFirst[page]:v.bi.pageFirst[page+1]]
	bodies, err := s.page(ctx, v.b, v.bi, int(page))
	if err != nil {
		if s.vanished(v.b, err) {
			rf.gone = true
		} else {
			s.opt.Logger.Warn("store: unreadable page skipped", "in", v.desc, "page", page, "err", err)
		}
		for _, ri := range rows {
			verdict[ri] = 2
		}
		return
	}
	for _, ri := range rows {
		r := v.rows.at(int(ri))
		verdict[ri] = 2
		if !rf.candidate(ri) || !rf.rowOK(r, since, until, after, better) || int(r.Index) >= len(bodies) {
			continue
		}
		body := bodies[r.Index]
		if !rf.bodyMayMatch(body) {
			continue
		}
		t, err := v.decode(body)
		if err != nil || !rf.f.spansMatch(t) {
			continue
		}
		verdict[ri] = 1
		traces[ri] = t
	}
}

// rowOK applies the time range, the cursor and the summary conditions to
// a row.
func (rf *rowFilter) rowOK(r *block.Summary, since, until int64, after *cursorPos, better func(a, b cursorPos) bool) bool {
	return r.Start >= since && r.Start <= until && (after == nil || better(*after, cursorPos{start: r.Start, id: r.ID})) && rf.rowMatch(r)
}

// maxEarlyStop: a unit's walk stops at Limit traces up to this Limit
// (beyond, telling parts of one trace apart costs more than it saves).
const maxEarlyStop = 1000

// sortSearch is sort.Search.
func sortSearch(n int, f func(int) bool) int {
	i, j := 0, n
	for i < j {
		h := int(uint(i+j) >> 1)
		if !f(h) {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}

// scanRow adds a row to res when the query selects it.
func (s *Store) scanRow(ctx context.Context, v *view, r *block.Summary, rf *rowFilter, res *unitHits, since, until int64, after *cursorPos, better func(a, b cursorPos) bool) {
	f := rf.f
	res.scanned++
	if !rf.rowOK(r, since, until, after, better) {
		return
	}
	pos := cursorPos{start: r.Start, id: r.ID}
	x := hit{pos: pos, v: v, row: *r}
	if f.needs {
		body, err := v.body(ctx, r)
		if s.vanished(v.b, err) {
			rf.gone = true
			return
		}
		if err != nil {
			s.readFault("store: unreadable trace skipped", "trace_id", r.ID.String(), "in", v.desc, "err", err)
			return
		}
		if !rf.bodyMayMatch(body) {
			return
		}
		t, err := v.decode(body)
		if err != nil || !f.spansMatch(t) {
			return
		}
		x.t = t
	}
	res.hits = append(res.hits, x)
}

// summaryOf describes a hit: its trace decoded, with all its parts when
// it is one of several (a part, or broken: a later part misses its
// parent).
func (s *Store) summaryOf(ctx context.Context, x *hit) (Summary, error) {
	t := x.t
	if t == nil {
		body, err := x.v.body(ctx, &x.row)
		if err != nil {
			return Summary{}, err
		}
		if t, err = x.v.decode(body); err != nil {
			return Summary{}, err
		}
	}
	if x.merge || t.Part != 0 || len(t.Broken) > 0 {
		whole, err := s.get(ctx, x.row.ID)
		if err != nil {
			return Summary{}, err
		}
		t = whole
	}
	sum := Summary{Host: x.v.p.host, ID: t.ID, TraceID: t.ID.String(), Start: t.Start(), Duration: t.Duration(), Spans: len(t.Spans),
		Errors: t.Errors(), Broken: len(t.Broken) > 0}
	sum.Error = sum.Errors > 0
	if root := t.Root(); root != nil {
		sum.Name = t.Name()
		sum.Service = root.Service
		sum.Attrs = append(trace.KiekerAttrs(root), root.Attributes...)
		sum.root = root
	}
	return sum, nil
}

// Get returns the trace with id: every part of it (in heads and blocks)
// merged, each span once (trace.MergeParts).
func (s *Store) Get(id trace.ID) (*trace.Trace, error) {
	s.refresh()
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	return s.get(ctx, id)
}

// get is Get. A block found gone from the bucket while it reads (deleted
// by retention or a compaction, here or on another node) is skipped and
// the trace read again over a new listing: its parts may be in the block
// that replaced it.
func (s *Store) get(ctx context.Context, id trace.ID) (*trace.Trace, error) {
	t, gone, err := s.getOnce(ctx, id)
	for try := 0; gone && try < goneRetries; try++ {
		if s.relistAfterGone(try) != nil {
			break
		}
		t, gone, err = s.getOnce(ctx, id)
	}
	return t, err
}

func (s *Store) getOnce(ctx context.Context, id trace.ID) (_ *trace.Trace, gone bool, _ error) {
	var parts []*trace.Trace
	var firstErr error
	hasID := func(r *block.Summary) bool { return r.ID == id }
	for _, p := range s.partitions() {
		p.mu.RLock()
		var views []*view
		type evictedHead struct {
			h      *head
			traces int
			off    int64
		}
		var evicted []evictedHead
		for _, h := range append(slices.Clip(p.sealed), p.head) {
			switch {
			case h == nil:
			case h.evicted:
				if h.idFilter.Has(block.HashID(id)) {
					evicted = append(evicted, evictedHead{h, h.traces, h.off})
				}
			case h.rows.contains(hasID):
				views = append(views, s.headView(p, h))
			}
		}
		blocks := slices.Clone(p.blocks)
		p.mu.RUnlock()
		for _, e := range evicted {
			r, release, err := s.readEvicted(ctx, e.h, e.traces, e.off)
			if errors.Is(err, os.ErrNotExist) {
				gone = true // uploaded meanwhile, and its file removed
				continue
			}
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			// The view keeps the trace's rows only: the index read back
			// goes now.
			v := s.headView(p, r)
			var rows rowList
			for i := range v.rows.len() {
				if row := v.rows.at(i); hasID(row) {
					rows.append(*row)
				}
			}
			v.rows, v.h, v.pairsOK = rows, &head{id: r.id}, nil
			release()
			if v.rows.len() > 0 {
				views = append(views, v)
			}
		}
		for _, b := range blocks {
			bi, err := s.index(ctx, b)
			if s.vanished(b, err) {
				gone = true
				continue
			}
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			if !bi.ids.Has(block.HashID(id)) {
				continue
			}
			v, err := s.blockView(ctx, p, b)
			if s.vanished(b, err) {
				gone = true
				continue
			}
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			views = append(views, v)
		}
		for _, v := range views {
			i := 0 // a head's rows are in arrival order
			if v.h == nil {
				i = sortSearch(v.rows.len(), func(i int) bool {
					r := v.rows.at(i)
					return cmp.Or(cmp.Compare(r.ID.Hi, id.Hi), cmp.Compare(r.ID.Lo, id.Lo)) >= 0
				})
			}
			for ; i < v.rows.len(); i++ {
				r := v.rows.at(i)
				if r.ID != id {
					if v.h != nil {
						continue
					}
					break
				}
				body, err := v.body(ctx, r)
				if s.vanished(v.b, err) {
					gone = true
					break
				}
				if err == nil {
					var t *trace.Trace
					if t, err = v.decode(body); err == nil {
						parts = append(parts, t)
						continue
					}
				}
				firstErr = cmp.Or(firstErr, err)
			}
		}
	}
	if len(parts) == 0 {
		if firstErr != nil {
			return nil, gone, firstErr
		}
		return nil, gone, ErrNotFound
	}
	slices.SortFunc(parts, func(a, b *trace.Trace) int {
		return cmp.Or(cmp.Compare(a.Part, b.Part), cmp.Compare(a.Start(), b.Start()))
	})
	return trace.MergeParts(parts), gone, nil
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
	slices.SortFunc(rows, func(a, b PivotRow) int {
		if a.Sum != b.Sum {
			if a.Sum > b.Sum {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Value, b.Value)
	})
	return rows, page.Partial, nil
}
