package analysis

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// Execution is one call as Kieker's trace analysis models it: an operation
// of an assembly component deployed on an execution container, from Start
// to End.
type Execution struct {
	// Container is the execution container: Kieker's hostname, an OTLP
	// span's service (else its host).
	Container string
	// Assembly is the assembly component: the component type's name, which
	// for Kieker is the class (the event's classSignature, else the class
	// of the operation signature).
	Assembly string
	// Operation is the signature as logged (an OTLP span's name); Sig is it
	// parsed; OpKey identifies the operation within its component
	// (Kieker's normalised signature, an OTLP span's name).
	Operation string
	Sig       Signature
	OpKey     string

	Start, End int64 // epoch ns
	Error      bool
	// Session is Kieker's sessionId ("" for spans).
	Session string
	// Caller is the index of the calling execution in the message trace,
	// -1 for a root call (a message from 'Entry').
	Caller int
}

// Duration returns End-Start.
func (e *Execution) Duration() int64 { return e.End - e.Start }

// Deployment returns the deployment (allocation) component's name,
// "<container>::<assembly>" as Kieker names it.
func (e *Execution) Deployment() string { return e.Container + "::" + e.Assembly }

// MessageTrace is one trace as Kieker's graph and call-tree filters see it:
// its executions in call order (Kieker's eoi order), each called by an
// earlier one or by 'Entry'.
type MessageTrace struct {
	// Trace is the assembled trace it belongs to; ID names the Kieker
	// trace (the traceId of a thread's TraceMetadata or of the OERs, in
	// decimal) or, for spans, the trace id.
	Trace trace.ID
	ID    string
	Execs []Execution
	// Source is where the trace came from (Kieker events, OERs, spans).
	Source trace.Source
}

// Invalid is a trace (or part of one) that Kieker's analysis drops.
type Invalid struct {
	ID     string // as MessageTrace.ID
	Reason string
	Calls  int // executions dropped
}

// Options say how traces become message traces.
type Options struct {
	// IncludeInvalid keeps what Kieker drops, as far as it was assembled
	// (every root call of a thread trace, traces with gaps or open calls).
	IncludeInvalid bool
	// Graphs, when not empty, are the only graphs an Analyzer builds
	// (with no call tree among them, it keeps no aggregated call trees,
	// whose nodes grow with the distinct call paths); Operations asks for
	// the statistics per operation too. Empty: everything.
	Graphs     []Kind
	Operations bool
}

// unit identifies the spans that form one Kieker trace within an
// assembled trace.
type unit struct {
	src trace.Source
	kid int64
}

func (u unit) id(t *trace.Trace) string {
	if u.src == trace.FromSpan {
		return t.ID.String()
	}
	return strconv.FormatInt(u.kid, 10)
}

// Messages splits an assembled trace into the message traces Kieker would
// analyse: one per thread trace (Kieker traceId) for event traces, one for
// the OERs of a traceId, one for the spans of an OTLP trace. It returns the
// valid ones and what Kieker would drop, with the reason.
func Messages(t *trace.Trace, o Options) ([]*MessageTrace, []Invalid) {
	threads, oers, spans, all := brokenUnits(t)
	groups := map[unit][]int{}
	var order []unit
	for i := range t.Spans {
		s := &t.Spans[i]
		u := unit{src: s.Source}
		if s.Source != trace.FromSpan {
			u.kid = s.KiekerTrace
		}
		if _, ok := groups[u]; !ok {
			order = append(order, u)
		}
		groups[u] = append(groups[u], i)
	}
	var out []*MessageTrace
	var invalid []Invalid
	for _, u := range order {
		idx := groups[u]
		id := u.id(t)
		// Call order: the Before event's orderIndex, the eoi, or the
		// span's start (tree order).
		switch u.src {
		case trace.FromEvents:
			slices.SortStableFunc(idx, func(a, b int) int { return int(t.Spans[a].OrderIndex) - int(t.Spans[b].OrderIndex) })
		case trace.FromExecution:
			slices.SortStableFunc(idx, func(a, b int) int { return int(t.Spans[a].EOI) - int(t.Spans[b].EOI) })
		}
		reason, keep := all, 0 // a reason about the whole trace drops it
		switch {
		case u.src == trace.FromEvents:
			if r, k := threadPrefix(t, idx, threads[u.kid]); reason == "" {
				reason, keep = r, k
			}
			delete(threads, u.kid)
		case reason != "":
		case u.src == trace.FromExecution:
			reason = oers
		case u.src == trace.FromSpan:
			reason = spans
		}
		if reason == "" {
			keep = len(idx)
		}
		if o.IncludeInvalid {
			reason, keep = "", len(idx)
		}
		if reason != "" {
			invalid = append(invalid, Invalid{ID: id, Reason: reason, Calls: len(idx) - keep})
		}
		if keep == 0 {
			continue
		}
		m := &MessageTrace{Trace: t.ID, ID: id, Execs: make([]Execution, 0, keep), Source: u.src}
		pos := make(map[int]int, keep) // span index -> execution index
		for _, i := range idx[:keep] {
			s := &t.Spans[i]
			caller := -1
			if p, ok := pos[int(s.Parent)]; ok {
				caller = p
			}
			pos[i] = len(m.Execs)
			m.Execs = append(m.Execs, execution(s, caller))
		}
		out = append(out, m)
	}
	if !o.IncludeInvalid {
		// Thread traces that gave no call (a return without its call).
		for _, kid := range slices.Sorted(maps.Keys(threads)) {
			invalid = append(invalid, Invalid{ID: strconv.FormatInt(kid, 10), Reason: threads[kid][0].text})
		}
	}
	return out, invalid
}

// threadPrefix decides which calls of a thread trace (idx, in orderIndex
// order) Kieker analyses: Kieker's reconstruction hands a thread trace on
// as soon as its first root call has returned with every event before
// (EventRecordTraceReconstructionFilter), so what comes after (more root
// calls, stray events) forms a trace without TraceMetadata, which is
// invalid, and spoils nothing before it. The first keep calls are valid
// unless a reason concerns the first root call, names no position or is a
// duplicate orderIndex (which the assembler cannot place; Kieker keeps the
// first root call when the duplicate comes after it); a non-empty reason
// says what is dropped.
func threadPrefix(t *trace.Trace, idx []int, reasons []threadReason) (reason string, keep int) {
	in := make(map[int32]bool, len(idx))
	for _, i := range idx {
		in[int32(i)] = true
	}
	keep = len(idx)
	for k, i := range idx {
		if k > 0 && !in[t.Spans[i].Parent] {
			keep = k // the second root call
			break
		}
	}
	// The first root returns at orderIndex first+2·keep-1 when none of its
	// events is missing (else a reason lies within).
	end := int64(t.Spans[idx[0]].OrderIndex) + 2*int64(keep) - 1
	for _, r := range reasons {
		if r.order < 0 || r.order <= end || strings.Contains(r.text, "used twice") {
			return r.text, 0
		}
	}
	switch {
	case len(reasons) > 0:
		return reasons[0].text, keep
	case keep < len(idx):
		return "root calls after the first (Kieker ends a thread trace when its first call returns)", keep
	}
	return "", keep
}

// execution models span s.
func execution(s *trace.Span, caller int) Execution {
	e := Execution{Operation: s.Operation, Start: s.Start, End: s.End, Error: s.Error, Session: s.Session, Caller: caller}
	switch s.Source {
	case trace.FromSpan:
		e.Container = s.Service
		if e.Container == "" {
			e.Container = s.Host
		}
		e.Sig = Signature{Class: s.Component, Name: s.Operation}
		if s.Component == "" {
			if p := ParseSignature(s.Operation); p.Class != "" && !strings.ContainsAny(s.Operation, " \t") {
				e.Sig = p
			}
		}
		e.Assembly = e.Sig.Class
		if e.Assembly == "" {
			e.Assembly = e.Container
		}
		e.OpKey = s.Operation
	default:
		e.Container = s.Host
		e.Sig = ParseSignature(s.Operation)
		e.Assembly = e.Sig.Class
		if s.Source == trace.FromEvents && s.Component != "" {
			// The event's classSignature names the assembly component
			// (Kieker's execution context); the assembler fills
			// Component with the parsed class when it is empty.
			e.Assembly = s.Component
		}
		e.OpKey = e.Sig.String()
	}
	return e
}

// The assembler's reasons name the Kieker trace they concern ("… of trace
// 42", "… for trace 42"); OER reasons start with "eoi", reasons about span
// ids and parents with "span" (Kieker's calls always have theirs, unless
// one of the former reasons holds). Reasons about links between thread
// traces and about clocks do not make a trace invalid for Kieker, which
// analyses every thread trace on its own and never compares timestamps.
var (
	reThread = regexp.MustCompile(`\b(?:of|for) trace (-?\d+)\b`)
	reLink   = regexp.MustCompile(`names parent trace|no call of parent trace`)
	reOrder  = regexp.MustCompile(`\borderIndex (-?\d+)\b`)
)

// threadReason is why a thread trace is broken, and the orderIndex where
// (-1 when the reason names none).
type threadReason struct {
	text  string
	order int64
}

// brokenUnits sorts the reasons t is broken by what they make invalid for
// Kieker: a thread trace (threads, by Kieker traceId, every reason with
// its orderIndex), the trace's OERs, its spans, or everything (all: a
// trace emitted in parts). oers, spans and all keep the first reason.
func brokenUnits(t *trace.Trace) (threads map[int64][]threadReason, oers, spans, all string) {
	threads = map[int64][]threadReason{}
	first := func(dst *string, r string) {
		if *dst == "" {
			*dst = r
		}
	}
	for _, r := range t.Broken {
		switch {
		case reLink.MatchString(r), strings.Contains(r, "before it starts"):
		case strings.HasPrefix(r, "eoi "):
			first(&oers, r)
		case strings.HasPrefix(r, "span "):
			first(&spans, r)
		default:
			m := reThread.FindStringSubmatch(r)
			if m == nil {
				first(&all, r)
				continue
			}
			kid, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				first(&all, r)
				continue
			}
			tr := threadReason{text: r, order: -1}
			if m := reOrder.FindStringSubmatch(r); m != nil {
				tr.order, _ = strconv.ParseInt(m[1], 10, 64)
			}
			threads[kid] = append(threads[kid], tr)
		}
	}
	return threads, oers, spans, all
}

// String describes an invalid trace in one line.
func (v Invalid) String() string {
	return fmt.Sprintf("trace %s (%d calls): %s", v.ID, v.Calls, v.Reason)
}
