package profile

import (
	"cmp"
	"context"
	"hash/maphash"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/jfrevents"
	"github.com/tracebridge/tracebridge/internal/jfrview"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Names of what the stage adds to spans.
const (
	EventName      = "profile.sample"
	AttrSamples    = "profile.samples"
	AttrFolded     = "profile.folded"
	AttrStack      = "profile.stack"
	AttrState      = "thread.state"
	OtherStacks    = flame.Other
	DefaultType    = "jdk.ExecutionSample"
	threadIDSuffix = ".javaThreadId"
)

// Defaults of Options.
const (
	DefaultPerThread        = 4096
	DefaultMaxThreads       = 4096
	DefaultMaxSamples       = 100_000
	DefaultMaxFrames        = 64
	DefaultMaxStacks        = 100_000
	DefaultMaxEventsPerSpan = 100
	DefaultMaxStacksPerSpan = 50
	DefaultRetain           = 2 * time.Minute
)

// Options configure a Stage. Zero values select the defaults.
type Options struct {
	// Types are the record types holding samples (default
	// jdk.ExecutionSample); each needs a thread field
	// (ThreadField.javaThreadId, long) and a stack field (string[], top
	// frame first).
	Types []string
	// ThreadField (default sampledThread), StackField (default
	// stackTrace) and StateField (default state) name the fields.
	ThreadField, StackField, StateField string
	// Lines keeps the line numbers of frames ("m() line: 12"); by default
	// they are cut so that samples of a method add up.
	Lines bool
	// IgnoreHost matches samples to spans by thread alone (one JVM, or
	// spans whose host is named differently from the samples').
	IgnoreHost bool

	PerThread, MaxThreads, MaxSamples, MaxFrames, MaxStacks int
	MaxEventsPerSpan, MaxStacksPerSpan                      int
	// Retain bounds how far behind the newest sample of its thread a
	// sample is kept.
	Retain time.Duration
	// History is how long each host's stacks are kept, per minute, for
	// flame graphs of a host and time window (default DefaultHistory).
	History time.Duration
	// Events bounds the event browser's window of recent JFR events
	// (internal/jfrevents; zero values: its defaults).
	Events jfrevents.Options
	// NoSpans keeps the flame graphs' history, the views and the event
	// browser but no samples per thread, and attaches none to spans
	// (Enrich does nothing): a cluster node's stage, where the spans of
	// a host's traces are assembled by the partitions' owners, not by
	// the node that received the host's samples (docs/CLUSTER.md).
	NoSpans bool
}

func (o *Options) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.PerThread, DefaultPerThread)
	def(&o.MaxThreads, DefaultMaxThreads)
	def(&o.MaxSamples, DefaultMaxSamples)
	def(&o.MaxFrames, DefaultMaxFrames)
	def(&o.MaxStacks, DefaultMaxStacks)
	def(&o.MaxEventsPerSpan, DefaultMaxEventsPerSpan)
	def(&o.MaxStacksPerSpan, DefaultMaxStacksPerSpan)
	o.PerThread = min(o.PerThread, o.MaxSamples)
	if o.Retain <= 0 {
		o.Retain = DefaultRetain
	}
	if o.History <= 0 {
		o.History = DefaultHistory
	}
	if len(o.Types) == 0 {
		o.Types = []string{DefaultType}
	}
	if o.ThreadField == "" {
		o.ThreadField = "sampledThread"
	}
	if o.StackField == "" {
		o.StackField = "stackTrace"
	}
	if o.StateField == "" {
		o.StateField = "state"
	}
}

// Stats count what a Stage did.
type Stats struct {
	Samples  int64 // samples kept
	Dropped  int64 // samples dropped by the limits before a trace asked
	Attached int64 // samples attached to spans
	Spans    int64 // spans that got samples
	Threads  int   // threads with samples now
	Held     int   // samples held now
}

// Stage keeps recent samples and attaches them to spans.
type Stage struct {
	next pipeline.Consumer
	opt  Options

	layouts map[*record.Type]layout
	rings   map[key]*ring
	byTID   map[int64][]*ring // for IgnoreHost
	held    int
	tick    int64 // a counter standing for time in the LRU order

	stacks  map[uint64]*stack
	seed    maphash.Seed
	frames  []string
	hist    *history   // the CPU samples (Options.Types)
	hists   []*history // per flame.Kinds entry but cpu: nil
	views   *jfrview.Keeper
	events  *jfrevents.Keeper
	classes flame.ClassNames

	mu    sync.Mutex
	stats Stats

	// scratch of Enrich
	hits []hit
}

var (
	_ pipeline.Consumer = (*Stage)(nil)
	_ pipeline.Enricher = (*Stage)(nil)
)

// New returns a stage handing records on to next.
func New(next pipeline.Consumer, opt Options) *Stage {
	opt.defaults()
	s := &Stage{next: next, opt: opt, layouts: map[*record.Type]layout{}, rings: map[key]*ring{},
		byTID: map[int64][]*ring{}, stacks: map[uint64]*stack{}, seed: maphash.MakeSeed(), hist: newHistory(opt.History, time.Now),
		hists: make([]*history, len(flame.Kinds)), views: jfrview.New(opt.History),
		events: jfrevents.New(opt.Events)}
	for i, k := range flame.Kinds {
		if k.Name != "cpu" {
			s.hists[i] = newHistory(opt.History, time.Now)
		}
	}
	return s
}

// Stats returns the counts so far.
func (s *Stage) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

type key struct {
	host string
	tid  int64
}

// layout is where a sample type keeps its fields (-1: not a sample type),
// and the flame graph kinds other than cpu it weighs in.
type layout struct {
	tid, stack, state int
	kinds             []kindLayout
}

// kindLayout is where an event type of a flame graph kind keeps its
// stack, weight and label (-1: none).
type kindLayout struct{ kind, stack, weight, label int }

type stack struct {
	frames []string // top frame first, transformed, at most MaxFrames
	hash   uint64
}

type sample struct {
	time    int64
	stack   *stack
	state   string
	session string
}

// ring holds one thread's samples in time order.
type ring struct {
	key  key
	buf  []sample // circular once it has PerThread entries
	head int      // index of the oldest
	n    int
	used int64 // Stage.tick when last added to
}

func (r *ring) at(i int) *sample { return &r.buf[(r.head+i)%len(r.buf)] }

// Consume notes the samples of b and hands b on.
func (s *Stage) Consume(ctx context.Context, b *record.Batch) error {
	for i := range b.Records {
		r := &b.Records[i]
		l, ok := s.layouts[r.Type]
		if !ok {
			l = s.layoutOf(r.Type)
			s.layouts[r.Type] = l
		}
		if l.tid >= 0 {
			s.add(r, l, &b.Origin)
		}
		for _, kl := range l.kinds {
			s.addKind(r, kl, b.Origin.Host)
		}
		s.views.Add(b.Origin.Host, r)
	}
	s.events.AddBatch(b)
	return s.next.Consume(ctx, b)
}

// addKind counts an event of a flame graph kind other than cpu in the
// history of that kind: its stack, with the label on top, by its weight.
func (s *Stage) addKind(r *record.Record, kl kindLayout, host string) {
	t := r.LoggingTimestamp
	list := r.Values[kl.stack].List()
	// A stack trace without frames (a JVM thread such as the Attach
	// Listener running a jcmd) counts, under its label alone, as analyze
	// --flame and jfr print count it; a null one does not.
	if t == record.NoTimestamp || list == nil {
		return
	}
	n := int64(1)
	if kl.weight >= 0 {
		if n = r.Values[kl.weight].Int(); n <= 0 {
			return
		}
	}
	label := ""
	if kl.label >= 0 {
		label = s.classes.Java(r.Values[kl.label].Str())
	}
	s.hists[kl.kind].add(host, t, s.intern(list.Items, label), n)
}

func (s *Stage) layoutOf(t *record.Type) layout {
	l := layout{-1, -1, -1, nil}
	for i, k := range flame.Kinds {
		if s.hists[i] == nil {
			continue
		}
		for _, e := range k.Events {
			if e.Type != t.Name {
				continue
			}
			kl := kindLayout{i, t.FieldIndex(s.opt.StackField), -1, -1}
			if kl.stack < 0 || !t.Fields[kl.stack].Array || t.Fields[kl.stack].Kind != record.String {
				continue
			}
			if e.Weight != "" {
				kl.weight = t.FieldIndex(e.Weight)
				if kl.weight < 0 || t.Fields[kl.weight].Array || !integral(t.Fields[kl.weight].Kind) {
					continue
				}
			}
			if e.Label != "" {
				if j := t.FieldIndex(e.Label); j >= 0 && !t.Fields[j].Array && t.Fields[j].Kind == record.String {
					kl.label = j
				}
			}
			l.kinds = append(l.kinds, kl)
		}
	}
	if !slices.Contains(s.opt.Types, t.Name) {
		return l
	}
	tid := t.FieldIndex(s.opt.ThreadField + threadIDSuffix)
	st := t.FieldIndex(s.opt.StackField)
	if tid < 0 || st < 0 || t.Fields[tid].Array || t.Fields[tid].Kind != record.Long || !t.Fields[st].Array || t.Fields[st].Kind != record.String {
		return l
	}
	l.tid, l.stack = tid, st
	if i := t.FieldIndex(s.opt.StateField); i >= 0 && !t.Fields[i].Array && t.Fields[i].Kind == record.String {
		l.state = i
	}
	return l
}

func (s *Stage) add(r *record.Record, l layout, o *record.Origin) {
	t := r.LoggingTimestamp
	list := r.Values[l.stack].List()
	if t == record.NoTimestamp || list == nil {
		return
	}
	if len(list.Items) == 0 { // in the flame graph as analyze --flame has it, on no span
		s.hist.add(o.Host, t, s.intern(nil, ""), 1)
		return
	}
	if s.opt.NoSpans {
		s.hist.add(o.Host, t, s.intern(list.Items, ""), 1)
		s.mu.Lock()
		s.stats.Samples++
		s.mu.Unlock()
		return
	}
	k := key{tid: r.Values[l.tid].Int()}
	if !s.opt.IgnoreHost {
		k.host = o.Host
	}
	rg := s.rings[k]
	if rg == nil {
		if len(s.rings) >= s.opt.MaxThreads {
			s.evictLRU()
		}
		rg = &ring{key: k}
		s.rings[k] = rg
		s.byTID[k.tid] = append(s.byTID[k.tid], rg)
	}
	s.tick++
	rg.used = s.tick
	smp := sample{time: t, stack: s.intern(list.Items, ""), session: o.Session}
	s.hist.add(o.Host, t, smp.stack, 1)
	if l.state >= 0 {
		smp.state = r.Values[l.state].Str()
	}
	dropped := s.push(rg, smp)
	for s.held > s.opt.MaxSamples {
		dropped += s.evictLRU()
	}
	s.mu.Lock()
	s.stats.Samples++
	s.stats.Dropped += int64(dropped)
	s.stats.Threads = len(s.rings)
	s.stats.Held = s.held
	s.mu.Unlock()
}

// push adds a sample in time order and drops what the ring's limits
// exclude; it returns how many samples were dropped.
func (s *Stage) push(rg *ring, smp sample) int {
	dropped := 0
	if rg.n == len(rg.buf) {
		if len(rg.buf) < s.opt.PerThread {
			// Grow, unrolling the circle.
			nb := make([]sample, min(max(16, 2*len(rg.buf)), s.opt.PerThread))
			for i := 0; i < rg.n; i++ {
				nb[i] = *rg.at(i)
			}
			rg.buf, rg.head = nb, 0
		} else {
			*rg.at(0) = sample{}
			rg.head = (rg.head + 1) % len(rg.buf)
			rg.n--
			s.held--
			dropped++
		}
	}
	// Append, then move it back while it is older than its predecessor
	// (samples of a thread nearly always come in order).
	i := rg.n
	*rg.at(i) = smp
	rg.n++
	s.held++
	for ; i > 0 && rg.at(i-1).time > smp.time; i-- {
		*rg.at(i) = *rg.at(i - 1)
		*rg.at(i - 1) = smp
	}
	newest := rg.at(rg.n - 1).time
	for rg.n > 1 && newest-rg.at(0).time > int64(s.opt.Retain) {
		*rg.at(0) = sample{}
		rg.head = (rg.head + 1) % len(rg.buf)
		rg.n--
		s.held--
		dropped++
	}
	return dropped
}

// evictLRU drops the thread sampled least recently and returns how many
// samples went with it.
func (s *Stage) evictLRU() int {
	var old *ring
	for _, rg := range s.rings {
		if old == nil || rg.used < old.used {
			old = rg
		}
	}
	if old == nil {
		return 0
	}
	delete(s.rings, old.key)
	rs := s.byTID[old.key.tid]
	rs = slices.DeleteFunc(rs, func(r *ring) bool { return r == old })
	if len(rs) == 0 {
		delete(s.byTID, old.key.tid)
	} else {
		s.byTID[old.key.tid] = rs
	}
	s.held -= old.n
	return old.n
}

// intern returns the stack of items (top frame first), with label as a
// frame above them unless it is "", shared with every earlier sample of
// the same stack.
func (s *Stage) intern(items []record.Value, label string) *stack {
	n := min(len(items), s.opt.MaxFrames)
	s.frames = s.frames[:0]
	var h maphash.Hash
	h.SetSeed(s.seed)
	if label != "" {
		s.frames = append(s.frames, label)
		h.WriteString(label)
		h.WriteByte(1)
	}
	for _, it := range items[:n] {
		f := it.Str()
		if !s.opt.Lines {
			f = flame.TrimLine(f)
		}
		s.frames = append(s.frames, f)
		h.WriteString(f)
		h.WriteByte(0)
	}
	sum := h.Sum64()
	if st := s.stacks[sum]; st != nil && slices.Equal(st.frames, s.frames) {
		return st
	}
	st := &stack{frames: slices.Clone(s.frames), hash: sum}
	if len(s.stacks) >= s.opt.MaxStacks {
		clear(s.stacks) // held samples keep theirs
	}
	s.stacks[sum] = st
	return st
}

// hit is a sample found for a span group.
type hit struct {
	smp  *sample
	span int // the span it goes to, -1 none
}

// Enrich attaches the samples taken during t's spans (see the package
// comment).
func (s *Stage) Enrich(t *trace.Trace) {
	if s.opt.NoSpans {
		return
	}
	// Group the spans by thread (and host).
	type group struct {
		rings []*ring
		spans []int
	}
	var groups map[key]*group
	for i := range t.Spans {
		sp := &t.Spans[i]
		if sp.Thread == "" {
			continue
		}
		tid, err := strconv.ParseInt(sp.Thread, 10, 64)
		if err != nil {
			continue // a thread name, not an id
		}
		k := key{tid: tid}
		if !s.opt.IgnoreHost {
			k.host = sp.Host
		}
		g := groups[k]
		if g == nil {
			var rs []*ring
			if s.opt.IgnoreHost {
				rs = s.byTID[tid]
			} else if rg := s.rings[k]; rg != nil {
				rs = []*ring{rg}
			}
			if len(rs) == 0 {
				continue
			}
			if groups == nil {
				groups = map[key]*group{}
			}
			g = &group{rings: rs}
			groups[k] = g
		}
		g.spans = append(g.spans, i)
	}
	var attached, spans int64
	for _, g := range groups {
		a, n := s.attach(t, g.rings, g.spans)
		attached += a
		spans += n
	}
	if attached > 0 {
		s.mu.Lock()
		s.stats.Attached += attached
		s.stats.Spans += spans
		s.mu.Unlock()
	}
}

// attach gives the samples of rings to the spans of one thread (indexes
// into t.Spans) and returns how many samples and spans it changed.
func (s *Stage) attach(t *trace.Trace, rings []*ring, idx []int) (int64, int64) {
	lo, hi := t.Spans[idx[0]].Start, t.Spans[idx[0]].End
	for _, i := range idx[1:] {
		lo, hi = min(lo, t.Spans[i].Start), max(hi, t.Spans[i].End)
	}
	s.hits = s.hits[:0]
	for _, rg := range rings {
		// The first sample at or after lo (the ring is in time order).
		first := sort.Search(rg.n, func(i int) bool { return rg.at(i).time >= lo })
		for i := first; i < rg.n && rg.at(i).time <= hi; i++ {
			s.hits = append(s.hits, hit{smp: rg.at(i), span: -1})
		}
	}
	if len(s.hits) == 0 {
		return 0, 0
	}
	if len(rings) > 1 {
		sort.SliceStable(s.hits, func(a, b int) bool { return s.hits[a].smp.time < s.hits[b].smp.time })
	}
	// Sweep: spans by start (deeper first among equal starts go later),
	// a stack of the spans open at the sample's time; the top is the
	// innermost.
	order := slices.Clone(idx)
	slices.SortStableFunc(order, func(a, b int) int {
		sa, sb := &t.Spans[a], &t.Spans[b]
		switch {
		case sa.Start != sb.Start:
			return cmp.Compare(sa.Start, sb.Start)
		case sa.Depth != sb.Depth:
			return cmp.Compare(int64(sa.Depth), int64(sb.Depth))
		}
		return cmp.Compare(sb.End, sa.End)
	})
	var open []int
	next := 0
	for h := range s.hits {
		ts := s.hits[h].smp.time
		for next < len(order) && t.Spans[order[next]].Start <= ts {
			open = append(open, order[next])
			next++
		}
		// Pop the spans that ended before the sample (and those of
		// another JVM than the sample's), looking below the top too.
		for j := len(open) - 1; j >= 0; j-- {
			sp := &t.Spans[open[j]]
			if sp.End < ts {
				if j == len(open)-1 {
					open = open[:j]
				}
				continue
			}
			if sp.Process != "" && s.hits[h].smp.session != "" && sp.Process != s.hits[h].smp.session {
				continue
			}
			s.hits[h].span = open[j]
			break
		}
	}
	// Per span, in span order; hits are in time order.
	slices.SortStableFunc(s.hits, func(a, b hit) int { return a.span - b.span })
	var attached, changed int64
	for h := 0; h < len(s.hits); {
		e := h
		for e < len(s.hits) && s.hits[e].span == s.hits[h].span {
			e++
		}
		if sp := s.hits[h].span; sp >= 0 {
			s.annotate(&t.Spans[sp], s.hits[h:e])
			attached += int64(e - h)
			changed++
		}
		h = e
	}
	return attached, changed
}

// annotate adds the samples (in time order) to a span.
func (s *Stage) annotate(sp *trace.Span, hits []hit) {
	// Distinct stacks, most frequent first (then by first appearance).
	type line struct {
		st    *stack
		count int64
		first int
	}
	byStack := map[*stack]*line{}
	var lines []*line
	for i, h := range hits {
		l := byStack[h.smp.stack]
		if l == nil {
			l = &line{st: h.smp.stack, first: i}
			byStack[h.smp.stack] = l
			lines = append(lines, l)
		}
		l.count++
	}
	sort.SliceStable(lines, func(a, b int) bool { return lines[a].count > lines[b].count })
	pos := make(map[*stack]int, len(lines))
	var b strings.Builder
	var other int64
	for i, l := range lines {
		if i >= s.opt.MaxStacksPerSpan {
			other += l.count
			pos[l.st] = s.opt.MaxStacksPerSpan
			continue
		}
		pos[l.st] = i
		for j := len(l.st.frames) - 1; j >= 0; j-- {
			if j < len(l.st.frames)-1 {
				b.WriteByte(';')
			}
			writeFrame(&b, l.st.frames[j])
		}
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(l.count, 10))
		b.WriteByte('\n')
	}
	if other > 0 {
		b.WriteString(OtherStacks + " " + strconv.FormatInt(other, 10) + "\n")
	}
	// Copy before appending: the slices may be shared with the records
	// the span was assembled from.
	sp.Attributes = append(slices.Clip(sp.Attributes),
		trace.Attr{Key: AttrSamples, Value: strconv.Itoa(len(hits)), Type: trace.TypeInt},
		trace.Attr{Key: AttrFolded, Value: b.String(), Type: trace.TypeString})
	n := min(len(hits), s.opt.MaxEventsPerSpan)
	events := make([]trace.Event, 0, len(sp.Events)+n)
	events = append(events, sp.Events...)
	for _, h := range hits[:n] {
		attrs := []trace.Attr{{Key: AttrStack, Value: strconv.Itoa(pos[h.smp.stack]), Type: trace.TypeInt}}
		if h.smp.state != "" {
			attrs = append(attrs, trace.Attr{Key: AttrState, Value: h.smp.state, Type: trace.TypeString})
		}
		events = append(events, trace.Event{Name: EventName, Time: h.smp.time, Attributes: attrs})
	}
	sp.Events = events
}

// writeFrame writes a frame with the folded format's separators replaced.
func writeFrame(b *strings.Builder, f string) {
	if f == "" {
		b.WriteString("[unknown]")
		return
	}
	for i := 0; i < len(f); i++ {
		switch c := f[i]; c {
		case ';':
			b.WriteByte(':')
		case '\n', '\r':
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
}

// integral reports whether a field of kind k holds an integer.
func integral(k record.Kind) bool {
	switch k {
	case record.Byte, record.Short, record.Int, record.Long:
		return true
	}
	return false
}
