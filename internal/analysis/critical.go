package analysis

import (
	"cmp"
	"slices"
)

// PathSegment is a stretch of time the trace's end waited on one span.
type PathSegment struct {
	Index     int    `json:"index"`
	Operation string `json:"operation"`
	Service   string `json:"service"`
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
	// OffsetNs and EndOffsetNs are Start and End less the trace's start
	// (exact in JavaScript, unlike unix times in ns).
	OffsetNs    int64 `json:"offsetNs"`
	EndOffsetNs int64 `json:"endOffsetNs"`
}

// PathSpan sums a span's segments.
type PathSpan struct {
	Index     int     `json:"index"`
	Operation string  `json:"operation"`
	Component string  `json:"component"`
	Service   string  `json:"service"`
	Host      string  `json:"host"`
	OnPathNs  int64   `json:"onPathNs"`
	Share     float64 `json:"share"` // of the root's duration
}

// CriticalPath is the chain of work the trace's end waited for.
type CriticalPath struct {
	Root       int           `json:"root"`
	DurationNs int64         `json:"durationNs"`
	Segments   []PathSegment `json:"segments"`
	Spans      []PathSpan    `json:"spans"`
}

// CriticalPath returns the critical path of the trace. It follows Jaeger's algorithm: from the root's end, walk
// back to the child that finished last before that point, descend into
// it, and when a span has no child left, its remaining time is on the
// path and the walk returns to its parent at the span's start. Children
// are cut to their parent's end; children that start after it are left
// out.
func (tr *Tree) CriticalPath() CriticalPath {
	t := tr.t
	cp := CriticalPath{Root: -1, Segments: []PathSegment{}, Spans: []PathSpan{}}
	// The root that ends last.
	for i := range t.Spans {
		if tr.Parent(i) < 0 && (cp.Root < 0 || t.Spans[i].End > t.Spans[cp.Root].End) {
			cp.Root = i
		}
	}
	if cp.Root < 0 {
		return cp
	}
	root := &t.Spans[cp.Root]
	cp.DurationNs = root.Duration()
	// children[i]: i's children by their (cut) end, latest first; next[i]
	// the first not yet taken (ends only move back in time).
	sorted := map[int][]int32{}
	pos := map[int]int{}
	childrenOf := func(i int) []int32 {
		if cs, ok := sorted[i]; ok {
			return cs
		}
		end := t.Spans[i].End
		var cs []int32
		for c := tr.first[i]; c >= 0; c = tr.next[c] {
			if t.Spans[c].Start <= end {
				cs = append(cs, c)
			}
		}
		cut := func(c int32) int64 { return min(t.Spans[c].End, end) }
		slices.SortStableFunc(cs, func(a, b int32) int { return cmp.Compare(cut(b), cut(a)) })
		sorted[i] = cs
		return cs
	}
	type frame struct {
		i   int
		end int64
	}
	var segs []PathSegment
	t0 := t.Start()
	seg := func(i int, start, end int64) {
		if start < end {
			segs = append(segs, PathSegment{Index: i, Operation: t.Spans[i].Operation, Service: t.Spans[i].Service, Start: start, End: end,
				OffsetNs: start - t0, EndOffsetNs: end - t0})
		}
	}
	stack := []frame{{cp.Root, root.End}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		s := &t.Spans[f.i]
		cs := childrenOf(f.i)
		p := pos[f.i]
		for p < len(cs) && min(t.Spans[cs[p]].End, s.End) > f.end {
			p++ // ends after the point the walk came back to: concurrent
		}
		if p < len(cs) {
			c := int(cs[p])
			pos[f.i] = p + 1
			cEnd := min(t.Spans[c].End, s.End)
			seg(f.i, cEnd, f.end)
			f.end = max(t.Spans[c].Start, s.Start)
			stack = append(stack, frame{c, cEnd})
			continue
		}
		pos[f.i] = p
		seg(f.i, s.Start, f.end)
		stack = stack[:len(stack)-1]
	}
	slices.Reverse(segs)
	cp.Segments = append(cp.Segments, segs...)
	on := map[int]int64{}
	var order []int
	for _, sg := range segs {
		if _, ok := on[sg.Index]; !ok {
			order = append(order, sg.Index)
		}
		on[sg.Index] += sg.End - sg.Start
	}
	for _, i := range order {
		s := &t.Spans[i]
		ps := PathSpan{Index: i, Operation: s.Operation, Component: s.Component, Service: s.Service, Host: s.Host, OnPathNs: on[i]}
		if cp.DurationNs > 0 {
			ps.Share = float64(on[i]) / float64(cp.DurationNs)
		}
		cp.Spans = append(cp.Spans, ps)
	}
	slices.SortStableFunc(cp.Spans, func(a, b PathSpan) int { return cmp.Compare(b.OnPathNs, a.OnPathNs) })
	return cp
}
