// Package sysmodel is Kieker's system model and its execution and message
// traces, as Kieker's trace-analysis tool builds and prints them
// (kieker.model.repository.SystemModelRepository, ExecutionTrace,
// MessageTrace): execution containers, component types, assembly
// components, allocation (deployment) components and operations, each
// numbered from 1 in the order Kieker creates them, so that the
// "host::@N:package.Class" names of Kieker's outputs come out the same.
//
// Kieker creates an entity the first time an execution needs it: for
// event traces when a completed trace is converted, innermost calls first
// (an execution is made when its After event is handled); for
// OperationExecutionRecords when the record is read (records are written
// when a call returns: in the order of their tout). Kieker hands event
// traces on when their first root call returns, and OER traces at the end
// of the log ordered by the tin of their first execution, then traceId.
// Model reproduces both orders from the assembled traces (it does not see
// the records' positions in the log: records of a trace are taken in the
// order their calls return, OERs of different traces by tout).
//
// A Model is used by one goroutine.
package sysmodel

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Container is an execution container (Kieker's hostname).
type Container struct {
	ID   int
	Name string
}

// ComponentType is a component type: a class, split at its last '.'.
type ComponentType struct {
	ID         int
	Package    string
	Name       string
	Operations []*Operation
	full       string // the name it was made from
}

// FullName returns the fully qualified name.
func (t *ComponentType) FullName() string {
	if t.full != "" {
		return t.full
	}
	if t.Package == "" {
		return t.Name
	}
	return t.Package + "." + t.Name
}

// Assembly is an assembly component: Kieker names it "@ID".
type Assembly struct {
	ID   int
	Type *ComponentType
}

// Name returns "@ID".
func (a *Assembly) Name() string { return "@" + strconv.Itoa(a.ID) }

// String returns "@ID:package.Class", as Kieker prints it.
func (a *Assembly) String() string { return a.Name() + ":" + a.Type.FullName() }

// Allocation is an allocation (deployment) component: an assembly
// component on an execution container.
type Allocation struct {
	ID        int
	Assembly  *Assembly
	Container *Container
}

// String returns "host::@ID:package.Class", as Kieker prints it.
func (a *Allocation) String() string { return a.Container.Name + "::" + a.Assembly.String() }

// Operation is an operation of a component type; Key identifies it within
// its type (analysis.Execution.OpKey).
type Operation struct {
	ID   int
	Type *ComponentType
	Sig  analysis.Signature
	Key  string
}

// Repository holds the entities in the order Kieker numbers them (each
// kind counts from 1).
type Repository struct {
	Containers  []*Container
	Types       []*ComponentType
	Assemblies  []*Assembly
	Allocations []*Allocation
	Operations  []*Operation

	containers  map[string]*Container
	types       map[string]*ComponentType
	assemblies  map[string]*Assembly
	allocations map[string]*Allocation
	ops         map[string]*Operation

	names map[string]string // AssemblyNames' map, for Assemblies[:len(names)]
}

// NewRepository returns an empty repository.
func NewRepository() *Repository {
	return &Repository{containers: map[string]*Container{}, types: map[string]*ComponentType{},
		assemblies: map[string]*Assembly{}, allocations: map[string]*Allocation{}, ops: map[string]*Operation{}}
}

// newType splits a fully qualified name at its last '.' as Kieker does.
func newType(id int, fq string) *ComponentType {
	for i := len(fq) - 1; i > 0; i-- {
		if fq[i] == '.' {
			return &ComponentType{ID: id, Package: fq[:i], Name: fq[i+1:], full: fq}
		}
	}
	return &ComponentType{ID: id, Name: fq, full: fq}
}

// Lookup returns the allocation component and operation of e, creating
// what is missing in Kieker's order (AbstractTraceAnalysisStage.
// createExecutionByEntityNames): the allocation component named
// "host::assembly", else the assembly component (its type first), the
// container, then the operation, keyed by the signature's class and the
// signature, and added to the assembly component's type.
func (r *Repository) Lookup(e *analysis.Execution) (*Allocation, *Operation) {
	return r.LookupNames(e.Container, e.Assembly, &e.Sig, e.OpKey)
}

// LookupNames is Lookup of an execution on container in the assembly
// component assembly, of the operation sig (opKey identifies it within
// sig.Class).
func (r *Repository) LookupNames(container, assembly string, sig *analysis.Signature, opKey string) (*Allocation, *Operation) {
	allocName := container + "::" + assembly
	alloc := r.allocations[allocName]
	if alloc == nil {
		asm := r.assemblies[assembly]
		if asm == nil {
			typ := r.types[assembly]
			if typ == nil {
				typ = newType(len(r.Types)+1, assembly)
				r.types[assembly] = typ
				r.Types = append(r.Types, typ)
			}
			asm = &Assembly{ID: len(r.Assemblies) + 1, Type: typ}
			r.assemblies[assembly] = asm
			r.Assemblies = append(r.Assemblies, asm)
		}
		c := r.containers[container]
		if c == nil {
			c = &Container{ID: len(r.Containers) + 1, Name: container}
			r.containers[container] = c
			r.Containers = append(r.Containers, c)
		}
		alloc = &Allocation{ID: len(r.Allocations) + 1, Assembly: asm, Container: c}
		r.allocations[allocName] = alloc
		r.Allocations = append(r.Allocations, alloc)
	}
	opName := sig.Class + "\x00" + opKey
	op := r.ops[opName]
	if op == nil {
		op = &Operation{ID: len(r.Operations) + 1, Type: alloc.Assembly.Type, Sig: *sig, Key: opKey}
		r.ops[opName] = op
		r.Operations = append(r.Operations, op)
		alloc.Assembly.Type.Operations = append(alloc.Assembly.Type.Operations, op)
	}
	return alloc, op
}

// AssemblyNames maps each assembly component's name as analysis names it
// (Execution.Assembly) to Kieker's "@N", for analysis.DOTOptions. The map
// is the repository's, brought up to date at each call: the caller does
// not change it.
func (r *Repository) AssemblyNames() map[string]string {
	if r.names == nil {
		r.names = make(map[string]string, len(r.Assemblies))
	}
	for _, a := range r.Assemblies[len(r.names):] {
		r.names[a.Type.FullName()] = a.Name()
	}
	return r.names
}

// NoSession is what Kieker prints for an execution without a session
// (spans).
const NoSession = "<NOSESSIONID>"

// Execution is one execution of an ExecutionTrace.
type Execution struct {
	Alloc     *Allocation
	Op        *Operation
	EOI, ESS  int
	Tin, Tout int64 // epoch ns
	Session   string
	Error     bool
	// Assumed: Kieker reconstructed the execution from a CallOperationEvent
	// alone (no Before and After events of the callee), or the callee's
	// events follow no matching call; printed " (assumed)".
	Assumed bool
}

// ExecutionTrace is a trace as Kieker's ExecutionTrace: its executions in
// eoi order.
type ExecutionTrace struct {
	// ID is the trace's id as printed: the Kieker traceId in decimal, or
	// a span trace's id; KID is the Kieker traceId (a span trace's low 64
	// bits), which orders traces and equivalence classes.
	ID      string
	KID     int64
	Session string
	Source  trace.Source
	Execs   []Execution
}

// MinTin returns the earliest tin.
func (t *ExecutionTrace) MinTin() int64 {
	var m int64 = -1
	for i := range t.Execs {
		if m < 0 || t.Execs[i].Tin < m {
			m = t.Execs[i].Tin
		}
	}
	return m
}

// MaxTout returns the latest tout.
func (t *ExecutionTrace) MaxTout() int64 {
	var m int64 = -1
	for i := range t.Execs {
		if m < 0 || t.Execs[i].Tout > m {
			m = t.Execs[i].Tout
		}
	}
	return m
}

// MaxESS returns the deepest ess (Kieker's "max. stack depth").
func (t *ExecutionTrace) MaxESS() int {
	m := -1
	for i := range t.Execs {
		m = max(m, t.Execs[i].ESS)
	}
	return m
}

// Model turns message traces into Kieker's execution traces over one
// Repository. It keeps the traces until Finish (Kieker's order and
// numbering depend on all of them), each execution in about 48 bytes:
// what it calls (an index into the distinct container, component and
// operation triples seen), its times, depth and session.
type Model struct {
	Repo    *Repository
	pending []pendingTrace
	keys    map[execKey]int32
	reps    []analysis.Execution // the first execution of each key
	bound   []boundKey           // its entities, once numbered
}

type boundKey struct {
	alloc *Allocation
	op    *Operation
}

type execKey struct{ container, assembly, class, op string }

type pendingTrace struct {
	id    string
	kid   int64
	src   trace.Source
	execs []compactExec
}

type compactExec struct {
	key       int32
	ess       int32
	tin, tout int64
	session   string
	err       bool
}

// New returns an empty model.
func New() *Model { return &Model{Repo: NewRepository(), keys: map[execKey]int32{}} }

// Add takes a valid message trace (analysis.Messages); the model keeps
// what Kieker's outputs need of it until Finish.
func (m *Model) Add(mt *analysis.MessageTrace) {
	p := pendingTrace{id: mt.ID, src: mt.Source, execs: make([]compactExec, len(mt.Execs))}
	for i := range mt.Execs {
		e := &mt.Execs[i]
		k := execKey{e.Container, e.Assembly, e.Sig.Class, e.OpKey}
		ki, ok := m.keys[k]
		if !ok {
			ki = int32(len(m.reps))
			m.keys[k] = ki
			m.reps = append(m.reps, *e)
		}
		c := compactExec{key: ki, tin: e.Start, tout: e.End, session: e.Session, err: e.Error}
		if e.Caller >= 0 {
			c.ess = p.execs[e.Caller].ess + 1
		}
		p.execs[i] = c
	}
	if mt.Source == trace.FromSpan {
		p.kid = int64(mt.Trace.Lo)
	} else {
		p.kid, _ = strconv.ParseInt(mt.ID, 10, 64)
	}
	m.pending = append(m.pending, p)
}

// postOrder returns the executions' indexes in the order their calls
// return (Kieker's After events): a call returns before the next call at
// its depth or above starts.
func postOrder(ess []int) []int {
	out := make([]int, 0, len(ess))
	stack := make([]int, 0, 16)
	for i := range ess {
		for len(stack) > 0 && ess[stack[len(stack)-1]] >= ess[i] {
			out = append(out, stack[len(stack)-1])
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, i)
	}
	for len(stack) > 0 {
		out = append(out, stack[len(stack)-1])
		stack = stack[:len(stack)-1]
	}
	return out
}

func (p *pendingTrace) essList() []int {
	out := make([]int, len(p.execs))
	for i := range p.execs {
		out[i] = int(p.execs[i].ess)
	}
	return out
}

// Finish numbers the entities and returns the execution traces in the
// order Kieker's tool hands them on: event traces when their first root
// call returns, then OER traces and span traces by the tin of their first
// execution and traceId.
func (m *Model) Finish() []*ExecutionTrace {
	ps := m.pending
	m.pending = nil
	emitted := func(p *pendingTrace) bool { return p.src == trace.FromEvents }
	slices.SortStableFunc(ps, func(a, b pendingTrace) int {
		ea, eb := emitted(&a), emitted(&b)
		switch {
		case ea && !eb:
			return -1
		case eb && !ea:
			return 1
		case ea:
			if c := cmp.Compare(a.execs[0].tout, b.execs[0].tout); c != 0 {
				return c
			}
		default:
			if c := cmp.Compare(a.execs[0].tin, b.execs[0].tin); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.kid, b.kid)
	})
	out := make([]*ExecutionTrace, len(ps))
	for i := range ps {
		p := &ps[i]
		t := &ExecutionTrace{ID: p.id, KID: p.kid, Source: p.src, Execs: make([]Execution, len(p.execs))}
		for j := range p.execs {
			e := &p.execs[j]
			s := e.session
			if p.src == trace.FromSpan && s == "" {
				s = NoSession
			}
			// Kieker marks a call below a thread trace's root "assumed"
			// unless a CallOperationEvent announced it; assembled traces
			// keep no Call events, so every such call is marked.
			t.Execs[j] = Execution{EOI: j, ESS: int(e.ess), Tin: e.tin, Tout: e.tout, Session: s, Error: e.err,
				Assumed: p.src == trace.FromEvents && e.ess > 0}
		}
		if len(t.Execs) > 0 {
			t.Session = t.Execs[0].Session
		}
		out[i] = t
	}
	// OERs are numbered as they are read: in the order of their tout.
	type ref struct{ t, e, pos int }
	var oers []ref
	for i := range ps {
		if ps[i].src != trace.FromExecution {
			continue
		}
		for k, j := range postOrder(ps[i].essList()) {
			oers = append(oers, ref{i, j, k})
		}
	}
	slices.SortStableFunc(oers, func(a, b ref) int {
		if c := cmp.Compare(out[a.t].Execs[a.e].Tout, out[b.t].Execs[b.e].Tout); c != 0 {
			return c
		}
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	for _, r := range oers {
		m.bind(ps[r.t].execs[r.e].key, &out[r.t].Execs[r.e])
	}
	for i := range ps {
		if ps[i].src == trace.FromExecution {
			continue
		}
		for _, j := range postOrder(ps[i].essList()) {
			m.bind(ps[i].execs[j].key, &out[i].Execs[j])
		}
	}
	return out
}

// bind gives dst the entities of its key, numbering them when the key
// comes first (a later lookup would find the same ones).
func (m *Model) bind(key int32, dst *Execution) {
	if len(m.bound) < len(m.reps) {
		m.bound = append(m.bound, make([]boundKey, len(m.reps)-len(m.bound))...)
	}
	b := &m.bound[key]
	if b.alloc == nil {
		b.alloc, b.op = m.Repo.Lookup(&m.reps[key])
	}
	dst.Alloc, dst.Op = b.alloc, b.op
}

// MessageTrace fills dst with t as the graph and call-tree analyses take
// it (analysis.Analyzer.AddMessages, analysis.TraceCallTree), reusing
// dst's executions; its strings are the repository's.
func (t *ExecutionTrace) MessageTrace(dst *analysis.MessageTrace) {
	dst.ID, dst.Source, dst.Trace = t.ID, t.Source, trace.ID{}
	dst.Execs = slices.Grow(dst.Execs[:0], len(t.Execs))
	var stack [64]int
	callers := stack[:0]
	for i := range t.Execs {
		e := &t.Execs[i]
		if e.ESS < len(callers) {
			callers = callers[:e.ESS]
		}
		caller := -1
		if len(callers) > 0 {
			caller = callers[len(callers)-1]
		}
		callers = append(callers, i)
		dst.Execs = append(dst.Execs, analysis.Execution{Container: e.Alloc.Container.Name, Assembly: e.Alloc.Assembly.Type.FullName(),
			Operation: e.Op.Key, Sig: e.Op.Sig, OpKey: e.Op.Key, Start: e.Tin, End: e.Tout, Error: e.Error, Session: e.Session, Caller: caller})
	}
}
