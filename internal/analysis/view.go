package analysis

import (
	"container/heap"
	"encoding/json"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// ViewOptions say what a view shows.
type ViewOptions struct {
	// MaxSpans bounds the spans shown (revealed spans and their
	// ancestors aside).
	MaxSpans int
	// MinDuration (ns): shorter spans are not shown (roots always are).
	MinDuration int64
	// Root is the index of the subtree shown; -1: the whole trace.
	Root int
	// Reveal are spans shown with their ancestors whatever their length.
	Reveal []int
	// Attributes: the spans' attributes are in the view.
	Attributes bool
}

// prune chooses the spans a view shows: the spans of Reveal and their
// ancestors, then, from the roots down, always the longest span whose
// parent is shown, until MaxSpans are shown; spans shorter than MinDuration
// are not shown (roots always are). It returns the shown flags of the
// spans of the scope [lo, hi).
func (tr *Tree) prune(o ViewOptions) (keep []bool, lo, hi int) {
	n := len(tr.t.Spans)
	lo, hi = 0, n
	if o.Root >= 0 {
		lo, hi = o.Root, o.Root+int(tr.size[o.Root])
	}
	keep = make([]bool, n)
	shown := 0
	for _, i := range o.Reveal {
		for i >= lo && i < hi && !keep[i] {
			keep[i] = true
			shown++
			if i == o.Root {
				break
			}
			i = tr.Parent(i)
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
			if tr.t.Spans[c].Duration() >= o.MinDuration {
				push(int(c))
			}
		}
	}
	if o.Root >= 0 {
		push(o.Root)
	} else {
		for i := range n {
			if tr.Parent(i) < 0 {
				push(i)
			}
		}
	}
	for i := lo; i < hi; i++ {
		if keep[i] {
			pushChildren(i)
		}
	}
	for shown < o.MaxSpans && h.Len() > 0 {
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

// SpanRef names a span: its ids, operation and where it ran, as the
// views of a trace show them.
type SpanRef struct {
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId,omitempty"`
	Operation    string `json:"operation"`
	Component    string `json:"component"`
	Host         string `json:"host"`
	Service      string `json:"service"`
	Process      string `json:"process,omitempty"`
	Thread       string `json:"thread,omitempty"`
}

// NewSpanRef returns the SpanRef of s.
func NewSpanRef(s *trace.Span) SpanRef {
	r := SpanRef{SpanID: s.SpanID.String(), Operation: s.Operation, Component: s.Component, Host: s.Host, Service: s.Service,
		Process: s.Process, Thread: s.Thread}
	if s.ParentID != 0 {
		r.ParentSpanID = s.ParentID.String()
	}
	return r
}

// ViewSpan is a span of a trace view.
type ViewSpan struct {
	// Index is the span's position in the trace (tree order), the key
	// of the other trace endpoints; Parent its parent's (-1 for a root
	// or a missing parent).
	Index  int   `json:"index"`
	Parent int   `json:"parent"`
	Depth  int32 `json:"depth"`
	SpanRef
	Start int64 `json:"start"`
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

// View renders a trace (or the subtree of o.Root) with the spans prune
// chooses: the longest first, at most o.MaxSpans, and counts what it
// leaves out.
func (tr *Tree) View(o ViewOptions) TraceView {
	t := tr.t
	keep, lo, hi := tr.prune(o)
	v := TraceView{TraceID: t.ID.String(), Start: t.Start(), End: t.End(), DurationNs: t.Duration(), Hosts: t.Hosts(),
		SpanCount: len(t.Spans), ErrorCount: t.Errors(), Broken: t.Broken, Part: t.Part, Root: o.Root, Spans: []ViewSpan{}}
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
		if p := tr.Parent(i); p >= lo && i != o.Root && keep[p] {
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
		vs := ViewSpan{Index: i, Parent: tr.Parent(i), Depth: s.Depth, SpanRef: NewSpanRef(s), Start: s.Start, OffsetNs: s.Start - t0,
			DurationNs: s.Duration(), SelfNs: tr.Self(i), Error: s.Error, Kind: s.Kind.String(), Message: s.StatusMessage,
			Children: int(tr.children[i]), Descendants: int(tr.size[i]) - 1}
		vs.Pruned = int(tr.size[i]) - 1 - int(shownDesc[i-lo])
		vs.PrunedErrors = int(tr.errs[i] - shownErr[i-lo])
		if o.Attributes {
			vs.Attributes = attrsObject(s)
		}
		v.Spans = append(v.Spans, vs)
		v.Shown++
	}
	// What the scope holds and the view leaves out.
	total, errs := 0, 0
	if o.Root >= 0 {
		total, errs = int(tr.size[o.Root]), int(tr.errs[o.Root])
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
func (tr *Tree) slowestAndErrors(lo, hi int) (slowest int, errs []int) {
	slowest, errs = -1, []int{}
	var most int64 = -1
	for i := lo; i < hi; i++ {
		if self := tr.Self(i); self > most {
			slowest, most = i, self
		}
		if tr.t.Spans[i].Error && len(errs) < maxErrorSpans {
			errs = append(errs, i)
		}
	}
	return slowest, errs
}
