package trace

import (
	"slices"
	"strings"
)

// MergeParts joins the parts of one trace (stored at different times:
// its spans arrived more than a trace window apart, or a part was cut at
// max_spans) into one trace: every span once (a span in two parts with
// the same id and content is one span), the tree built again, and broken
// only for what is still missing after the merge. The parts are not
// changed; one part is returned as it is.
func MergeParts(parts []*Trace) *Trace {
	switch len(parts) {
	case 0:
		return nil
	case 1:
		return parts[0]
	}
	out := &Trace{ID: parts[0].ID}
	n := 0
	for _, p := range parts {
		n += len(p.Spans)
	}
	out.Spans = make([]Span, 0, n)
	for _, p := range parts {
		out.Spans = append(out.Spans, p.Spans...) // tree drops a span twice
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

// treeReason reports whether r is one of the reasons tree gives.
func treeReason(r string) bool {
	return strings.HasPrefix(r, "span ") && (strings.HasSuffix(r, " missing") || strings.Contains(r, " used twice") ||
		strings.HasSuffix(r, "is its own parent") || strings.HasSuffix(r, "is its own ancestor") || strings.Contains(r, " before it starts"))
}
