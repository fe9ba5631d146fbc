package api

import (
	"container/heap"
	"encoding/json"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// tree holds what the views of a trace need about its shape, computed in
// one pass (spans are in tree order: a parent before its subtree, so a
// subtree is the contiguous run [i, i+size[i])).
type tree struct {
	t         *trace.Trace
	size      []int32 // spans in the subtree, the span included
	errs      []int32 // spans in error in the subtree
	children  []int32 // direct children
	childTime []int64 // the children's durations summed
	first     []int32 // first child (-1: none)
	next      []int32 // next sibling (-1: none)
}

func newTree(t *trace.Trace) *tree {
	n := len(t.Spans)
	tr := &tree{t: t, size: make([]int32, n), errs: make([]int32, n), children: make([]int32, n),
		childTime: make([]int64, n), first: make([]int32, n), next: make([]int32, n)}
	for i := range n {
		tr.first[i], tr.next[i] = -1, -1
	}
	for i := n - 1; i >= 0; i-- {
		s := &t.Spans[i]
		tr.size[i]++
		if s.Error {
			tr.errs[i]++
		}
		if p := tr.parent(i); p >= 0 {
			tr.size[p] += tr.size[i]
			tr.errs[p] += tr.errs[i]
			tr.children[p]++
			tr.childTime[p] += s.Duration()
			tr.next[i] = tr.first[p]
			tr.first[p] = int32(i)
		}
	}
	return tr
}

// parent returns the index of span i's parent (-1 for a root, or a
// parent that is missing or, in a malformed trace, not before it).
func (tr *tree) parent(i int) int {
	p := int(tr.t.Spans[i].Parent)
	if p < 0 || p >= i {
		return -1
	}
	return p
}

// self returns span i's time outside its children (never below 0).
func (tr *tree) self(i int) int64 {
	return max(tr.t.Spans[i].Duration()-tr.childTime[i], 0)
}

// pruneOptions say what a view shows.
type pruneOptions struct {
	maxSpans int
	minDur   int64
	root     int // -1: the whole trace
	reveal   []int
}

// prune chooses the spans a view shows: the spans of reveal and their
// ancestors, then, from the roots down, always the longest span whose
// parent is shown, until maxSpans are shown; spans shorter than minDur
// are not shown (roots always are). It returns the shown flags of the
// spans of the scope [lo, hi).
func (tr *tree) prune(o pruneOptions) (keep []bool, lo, hi int) {
	n := len(tr.t.Spans)
	lo, hi = 0, n
	if o.root >= 0 {
		lo, hi = o.root, o.root+int(tr.size[o.root])
	}
	keep = make([]bool, n)
	shown := 0
	for _, i := range o.reveal {
		for i >= lo && i < hi && !keep[i] {
			keep[i] = true
			shown++
			if i == o.root {
				break
			}
			i = tr.parent(i)
		}
	}
	h := &spanHeap{t: tr.t}
	push := func(i int) {
		if !keep[i] {
			heap.Push(h, int32(i))
		}
	}
	pushChildren := func(i int) {
		for c := tr.first[i]; c >= 0; c = tr.next[c] {
			if tr.t.Spans[c].Duration() >= o.minDur {
				push(int(c))
			}
		}
	}
	if o.root >= 0 {
		push(o.root)
	} else {
		for i := range n {
			if tr.parent(i) < 0 {
				push(i)
			}
		}
	}
	for i := lo; i < hi; i++ {
		if keep[i] {
			pushChildren(i)
		}
	}
	for shown < o.maxSpans && h.Len() > 0 {
		i := int(heap.Pop(h).(int32))
		if keep[i] {
			continue
		}
		keep[i] = true
		shown++
		pushChildren(i)
	}
	return keep, lo, hi
}

// spanHeap orders span indexes longest first (then in tree order).
type spanHeap struct {
	t  *trace.Trace
	ix []int32
}

func (h *spanHeap) Len() int { return len(h.ix) }
func (h *spanHeap) Less(a, b int) bool {
	da, db := h.t.Spans[h.ix[a]].Duration(), h.t.Spans[h.ix[b]].Duration()
	if da != db {
		return da > db
	}
	return h.ix[a] < h.ix[b]
}
func (h *spanHeap) Swap(a, b int) { h.ix[a], h.ix[b] = h.ix[b], h.ix[a] }
func (h *spanHeap) Push(x any)    { h.ix = append(h.ix, x.(int32)) }
func (h *spanHeap) Pop() any {
	x := h.ix[len(h.ix)-1]
	h.ix = h.ix[:len(h.ix)-1]
	return x
}

// ViewSpan is a span of a trace view.
type ViewSpan struct {
	// Index is the span's position in the trace (tree order), the key
	// of the other trace endpoints; Parent its parent's (-1 for a root
	// or a missing parent).
	Index        int    `json:"index"`
	Parent       int    `json:"parent"`
	Depth        int32  `json:"depth"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId,omitempty"`
	Operation    string `json:"operation"`
	Component    string `json:"component"`
	Host         string `json:"host"`
	Service      string `json:"service"`
	Process      string `json:"process,omitempty"`
	Thread       string `json:"thread,omitempty"`
	Start        int64  `json:"start"`
	// OffsetNs is Start less the trace's start: exact in JavaScript,
	// where a unix time in ns is a double rounded to 256 ns.
	OffsetNs   int64  `json:"offsetNs"`
	DurationNs int64  `json:"durationNs"`
	SelfNs     int64  `json:"selfNs"`
	Error      bool   `json:"error"`
	Kind       string `json:"kind"`
	Message    string `json:"statusMessage,omitempty"`
	// Children and Descendants count the span's children and its whole
	// subtree in the trace; Pruned and PrunedErrors what of the subtree
	// the view leaves out.
	Children     int                        `json:"children"`
	Descendants  int                        `json:"descendants"`
	Pruned       int                        `json:"pruned"`
	PrunedErrors int                        `json:"prunedErrors"`
	Attributes   map[string]json.RawMessage `json:"attributes,omitempty"`
}

// TraceView is a trace (or a subtree) summarised for display.
type TraceView struct {
	TraceID    string   `json:"traceId"`
	Start      int64    `json:"start"`
	End        int64    `json:"end"`
	DurationNs int64    `json:"durationNs"`
	Hosts      []string `json:"hosts"`
	Services   []string `json:"services"`
	// SpanCount and ErrorCount are the whole trace's.
	SpanCount  int      `json:"spanCount"`
	ErrorCount int      `json:"errorCount"`
	Broken     []string `json:"broken"`
	Part       int      `json:"part,omitempty"`
	// Root is the index of the subtree shown (-1: the whole trace).
	Root int `json:"root"`
	// Shown spans are in Spans; Pruned (PrunedErrors in error) are not.
	Shown        int `json:"shown"`
	Pruned       int `json:"pruned"`
	PrunedErrors int `json:"prunedErrors"`
	// Slowest is the span of the scope with the most self time (-1: no
	// span), shown or not, so the UI can jump to it with reveal.
	Slowest int `json:"slowest"`
	// ErrorSpans are the indexes of the scope's spans in error, shown or
	// not, in tree order; at most maxErrorSpans (ErrorCount or the
	// root's counts say how many in all).
	ErrorSpans []int      `json:"errorSpans"`
	Spans      []ViewSpan `json:"spans"`
}

// maxErrorSpans bounds TraceView.ErrorSpans.
const maxErrorSpans = 10_000

func attrsObject(s *trace.Span) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(s.Attributes))
	for _, a := range s.Attributes {
		if _, dup := m[a.Key]; !dup {
			m[a.Key] = trace.AttrJSON(a)
		}
	}
	return m
}

// view renders the spans prune chose.
func (tr *tree) view(o pruneOptions, attrs bool) TraceView {
	t := tr.t
	keep, lo, hi := tr.prune(o)
	v := TraceView{TraceID: t.ID.String(), Start: t.Start(), End: t.End(), DurationNs: t.Duration(), Hosts: t.Hosts(),
		SpanCount: len(t.Spans), ErrorCount: t.Errors(), Broken: t.Broken, Part: t.Part, Root: o.root, Spans: []ViewSpan{}}
	if v.Hosts == nil {
		v.Hosts = []string{}
	}
	if v.Broken == nil {
		v.Broken = []string{}
	}
	seen := map[string]bool{}
	v.Services = []string{}
	for i := range t.Spans {
		if s := t.Spans[i].Service; s != "" && !seen[s] {
			seen[s] = true
			v.Services = append(v.Services, s)
		}
	}
	// Shown descendants per shown span, children after parents.
	shownDesc := make([]int32, hi-lo)
	shownErr := make([]int32, hi-lo)
	for i := hi - 1; i >= lo; i-- {
		if !keep[i] {
			continue
		}
		if t.Spans[i].Error {
			shownErr[i-lo]++
		}
		if p := tr.parent(i); p >= lo && i != o.root && keep[p] {
			shownDesc[p-lo] += 1 + shownDesc[i-lo]
			shownErr[p-lo] += shownErr[i-lo]
		}
	}
	t0 := v.Start // Trace.Start reads every span: once
	for i := lo; i < hi; i++ {
		if !keep[i] {
			continue
		}
		s := &t.Spans[i]
		vs := ViewSpan{Index: i, Parent: tr.parent(i), Depth: s.Depth, SpanID: s.SpanID.String(), Operation: s.Operation,
			Component: s.Component, Host: s.Host, Service: s.Service, Process: s.Process, Thread: s.Thread, Start: s.Start, OffsetNs: s.Start - t0, DurationNs: s.Duration(),
			SelfNs: tr.self(i), Error: s.Error, Kind: s.Kind.String(), Message: s.StatusMessage,
			Children: int(tr.children[i]), Descendants: int(tr.size[i]) - 1}
		if s.ParentID != 0 {
			vs.ParentSpanID = s.ParentID.String()
		}
		vs.Pruned = int(tr.size[i]) - 1 - int(shownDesc[i-lo])
		vs.PrunedErrors = int(tr.errs[i] - shownErr[i-lo])
		if attrs {
			vs.Attributes = attrsObject(s)
		}
		v.Spans = append(v.Spans, vs)
		v.Shown++
	}
	// What the scope holds and the view leaves out.
	total, errs := 0, 0
	if o.root >= 0 {
		total, errs = int(tr.size[o.root]), int(tr.errs[o.root])
	} else {
		total, errs = len(t.Spans), t.Errors()
	}
	shownErrs := 0
	for _, s := range v.Spans {
		if s.Error {
			shownErrs++
		}
	}
	v.Pruned, v.PrunedErrors = total-v.Shown, errs-shownErrs
	v.Slowest, v.ErrorSpans = tr.slowestAndErrors(lo, hi)
	return v
}

// slowestAndErrors returns the span of [lo, hi) with the most self time
// (the first of equals; -1 for an empty range) and the first
// maxErrorSpans spans in error.
func (tr *tree) slowestAndErrors(lo, hi int) (slowest int, errs []int) {
	slowest, errs = -1, []int{}
	var most int64 = -1
	for i := lo; i < hi; i++ {
		if self := tr.self(i); self > most {
			slowest, most = i, self
		}
		if tr.t.Spans[i].Error && len(errs) < maxErrorSpans {
			errs = append(errs, i)
		}
	}
	return slowest, errs
}
