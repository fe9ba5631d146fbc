package trace

import (
	"math/bits"
	"slices"
	"strings"
)

// MergeParts joins the parts of one trace (stored at different times:
// its spans arrived more than a trace window apart, or a part was cut at
// max_spans; or stored twice: in a cluster, a partition taken over is
// assembled again from what was not yet acknowledged, so a trace, or some
// of its spans, may be in blocks of two nodes) into one trace: every span
// once, the tree built again, and broken only for what is still missing
// after the merge. The parts are not changed; one part is returned as it
// is.
//
// A span id is one span across parts (the dedupe rule of trace id, span
// id): a part whose every span id is in another part is a copy and is
// left out whole (its broken reasons too: the other says more); of a span
// in several parts the copy that says most is kept (the longer: a Kieker
// call closed in one part and still open in another; then the one with
// more attributes, events and links; then the first). Kieker's span ids
// derive from the Kieker trace id and the orderIndex or eoi, and zorka's
// number the calls in order, so a trace assembled again has the same
// ids.
func MergeParts(parts []*Trace) *Trace {
	switch len(parts) {
	case 0:
		return nil
	case 1:
		return parts[0]
	}
	parts = distinctParts(parts)
	if len(parts) == 1 {
		return parts[0]
	}
	out := &Trace{ID: parts[0].ID}
	n := 0
	for _, p := range parts {
		n += len(p.Spans)
	}
	out.Spans = make([]Span, 0, n)
	type place struct {
		at   int32 // in out.Spans
		part int32
	}
	seen := make(map[SpanID]place, n)
	var res map[*Resource]*Resource
	var scopes map[*Scope]*Scope
	for pi, p := range parts {
		res = unify(&out.Resources, res, p.Resources, (*Resource).Equal)
		scopes = unify(&out.Scopes, scopes, p.Scopes, (*Scope).Equal)
		for i := range p.Spans {
			s := &p.Spans[i]
			if was, ok := seen[s.SpanID]; ok && int(was.part) != pi {
				if k := &out.Spans[was.at]; says(s, k) > 0 {
					*k = *s
					k.Resource, k.Scope = mapped(res, s.Resource), mapped(scopes, s.Scope)
				}
				continue
			}
			seen[s.SpanID] = place{at: int32(len(out.Spans)), part: int32(pi)}
			out.Spans = append(out.Spans, *s) // tree renames an id used twice within a part
			k := &out.Spans[len(out.Spans)-1]
			k.Resource, k.Scope = mapped(res, s.Resource), mapped(scopes, s.Scope)
		}
		for _, r := range p.Broken {
			// What the tree says (missing parents, ids used twice, cycles,
			// negative durations) is said again by tree below.
			if treeReason(r) || slices.Contains(out.Broken, r) {
				continue
			}
			out.Broken = append(out.Broken, r)
		}
	}
	tree(out)
	return out
}

// distinctParts leaves out the parts that are copies: those whose every
// span id another part holds (of two parts with the same ids, the one
// that says more stays, saysMore, else the first: a Kieker trace whose
// events were assembled once without their TraceMetadata, which came
// later than the window, and once whole, by a later owner reading both
// from the stream, is shown whole on every node). Parts are compared as
// sets of span ids, up to 64 parts (more are left as they are).
func distinctParts(parts []*Trace) []*Trace {
	if len(parts) > 64 {
		return parts
	}
	holders := map[SpanID]uint64{} // span id → the parts holding it, a bit each
	for pi, p := range parts {
		for i := range p.Spans {
			holders[p.Spans[i].SpanID] |= 1 << pi
		}
	}
	var drop uint64
	for pi, p := range parts {
		if len(p.Spans) == 0 {
			drop |= 1 << pi
			continue
		}
		others := ^uint64(0) &^ (1 << pi) &^ drop
		for i := range p.Spans {
			if others &= holders[p.Spans[i].SpanID]; others == 0 {
				break
			}
		}
		// Another part holds every id of this one: this one goes if the
		// other holds more, or as many (the same ids) and says more
		// (saysMore), or as much and comes first.
		for o := others; o != 0; o &= o - 1 {
			j := bits.TrailingZeros64(o)
			q := parts[j]
			if len(q.Spans) > len(p.Spans) || saysMore(q, p) || j < pi && !saysMore(p, q) {
				drop |= 1 << pi
				break
			}
		}
	}
	if drop == 0 {
		return parts
	}
	kept := make([]*Trace, 0, len(parts))
	for pi, p := range parts {
		if drop&(1<<pi) == 0 {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		kept = parts[:1]
	}
	return kept
}

// saysMore reports whether copy a of a trace says more than copy b, of
// the same spans: it is broken for fewer reasons, or for as many that
// come first in order (so that the copy kept does not depend on the
// order the parts were read in, which differs between nodes).
func saysMore(a, b *Trace) bool {
	if len(a.Broken) != len(b.Broken) {
		return len(a.Broken) < len(b.Broken)
	}
	return slices.Compare(a.Broken, b.Broken) < 0
}

// says compares what two copies of a span say: > 0 when a says more than
// b (it lasts longer; else it has more attributes, events and links).
func says(a, b *Span) int {
	if da, db := a.End-a.Start, b.End-b.Start; da != db {
		if da > db {
			return 1
		}
		return -1
	}
	return len(a.Attributes) + len(a.Events) + len(a.Links) - len(b.Attributes) - len(b.Events) - len(b.Links)
}

// unify adds to list the entries of from that no equal entry in it
// stands for, and returns the map from each entry of from to the one that
// stands for it (m, made when needed).
func unify[T comparable](list *[]T, m map[T]T, from []T, equal func(T, T) bool) map[T]T {
	for _, x := range from {
		if _, ok := m[x]; ok {
			continue
		}
		y := x
		for _, z := range *list {
			if equal(z, x) {
				y = z
				break
			}
		}
		if y == x {
			*list = append(*list, x)
		}
		if m == nil {
			m = map[T]T{}
		}
		m[x] = y
	}
	return m
}

// mapped returns what m maps x to (x itself when it maps nothing).
func mapped[T comparable](m map[T]T, x T) T {
	if y, ok := m[x]; ok {
		return y
	}
	return x
}

// treeReason reports whether r is one of the reasons tree gives.
func treeReason(r string) bool {
	return strings.HasPrefix(r, "span ") && (strings.HasSuffix(r, " missing") || strings.Contains(r, " used twice") ||
		strings.HasSuffix(r, "is its own parent") || strings.HasSuffix(r, "is its own ancestor") || strings.Contains(r, " before it starts"))
}
