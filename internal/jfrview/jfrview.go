// Package jfrview keeps, per host, what JDK Mission Control's views show
// of JFR events besides flame graphs: garbage collections and their
// pauses (and pause phases, jdk.GCPhasePause), the heap after each collection, the classes allocated (by
// allocation sample weight), contended monitors, the slowest
// file and socket operations and exceptions by class. A Keeper takes the
// records (the profile stage hands it every batch) and answers Views of a
// host and time window for the HTTP API (/api/v1/profiles/views).
//
// Limits: per host, at most MaxEvents collections, pause phases and heap summaries
// (the oldest go first), per host and minute at most MaxClasses allocated, monitor
// and exception classes (further ones count under "[other classes]") and
// the MaxSlow slowest I/O operations; minutes older than the history
// (following the newest minute seen, as the flame graphs' history does)
// and hosts without newer events are forgotten.
//
// Concurrency: Add runs on one goroutine (the pipeline's); Views may be
// called from any goroutine at the same time.
package jfrview

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Limits (see the package comment).
const (
	MaxEvents  = 10_000
	MaxClasses = 1_000
	MaxSlow    = 50
	Other      = "[other classes]"
)

// Views are the JMC views of one host in a time window.
type Views struct {
	GC GCView `json:"gc"`
	// Heap is the heap used after each collection, oldest first.
	Heap []HeapPoint `json:"heap"`
	// Allocations are the classes allocated (jdk.ObjectAllocationSample
	// weights, in bytes), most first.
	Allocations []Alloc `json:"allocations"`
	// Monitors are the contended monitors (jdk.JavaMonitorEnter), most
	// waited on first.
	Monitors []Monitor `json:"monitors"`
	// SlowIO are the slowest file and socket operations, slowest first.
	SlowIO []IOOp `json:"slowIO"`
	// Exceptions are the classes thrown (jdk.JavaExceptionThrow, else
	// jdk.JavaErrorThrow when no exception events came), most first.
	Exceptions []Thrown `json:"exceptions"`
}

// GCView sums the collections (jdk.GarbageCollection) of the window.
type GCView struct {
	Count        int64 `json:"count"`
	TotalPauseNs int64 `json:"totalPauseNs"` // sum of sumOfPauses
	LongestNs    int64 `json:"longestPauseNs"`
	// Pauses are the collections, oldest first: the timeline.
	Pauses []GCPause `json:"pauses"`
	// Phases are the pause phases of the collections
	// (jdk.GCPhasePause), oldest first, with their count, total and
	// longest.
	Phases         []GCPhase `json:"phases"`
	PhaseCount     int64     `json:"phaseCount"`
	PhaseTotalNs   int64     `json:"phaseTotalNs"`
	PhaseLongestNs int64     `json:"phaseLongestNs"`
}

// GCPhase is one pause phase of a collection (jdk.GCPhasePause).
type GCPhase struct {
	Time       int64  `json:"time"`
	ID         int64  `json:"gcId"`
	Name       string `json:"name"` // "GC Pause", "Pause Remark", …
	DurationNs int64  `json:"durationNs"`
}

// GCPause is one collection.
type GCPause struct {
	Time       int64  `json:"time"` // start, unix ns
	ID         int64  `json:"gcId"`
	Name       string `json:"name"` // G1New, G1Old, …
	Cause      string `json:"cause"`
	DurationNs int64  `json:"durationNs"`
	PauseNs    int64  `json:"pauseNs"`   // sumOfPauses
	LongestNs  int64  `json:"longestNs"` // longestPause
}

// HeapPoint is jdk.GCHeapSummary "After GC".
type HeapPoint struct {
	Time      int64 `json:"time"`
	ID        int64 `json:"gcId"`
	Used      int64 `json:"usedBytes"`
	Committed int64 `json:"committedBytes"`
}

// Class names are written as Java source writes them ("byte[]", as the
// flame graphs do).

// Alloc is the allocation samples of one class: how many, and the bytes
// they stand for (their weights).
type Alloc struct {
	Class   string `json:"class"`
	Samples int64  `json:"samples"`
	Bytes   int64  `json:"bytes"`
}

// Monitor is the waits on the monitors of one class.
type Monitor struct {
	Class   string `json:"class"`
	Count   int64  `json:"count"`
	TotalNs int64  `json:"totalNs"`
	MaxNs   int64  `json:"maxNs"`
}

// IOOp is one file or socket operation.
type IOOp struct {
	Type       string   `json:"type"`   // jdk.FileRead, …
	Target     string   `json:"target"` // the path, or host:port
	Bytes      int64    `json:"bytes"`
	DurationNs int64    `json:"durationNs"`
	Time       int64    `json:"time"`
	Thread     string   `json:"thread"`
	Stack      []string `json:"stack,omitempty"` // top frame first
}

// Thrown is the throws of one class, with the stack of the first.
type Thrown struct {
	Class   string   `json:"class"`
	Count   int64    `json:"count"`
	Message string   `json:"message,omitempty"`
	Stack   []string `json:"stack,omitempty"` // top frame first
}

// Keeper keeps the events of the views per host.
type Keeper struct {
	keep int64 // minutes
	mu   sync.Mutex
	// guarded by mu
	hosts  map[string]*host
	newest int64 // unix minute
	// Add's own
	layouts map[*record.Type]*layout
	classes flame.ClassNames
}

type host struct {
	gcs     []GCPause   // ring, oldest first after sort
	phases  []GCPhase   // ring
	heap    []HeapPoint // ring
	minutes map[int64]*minute
	newest  int64
}

type minute struct {
	allocs     map[string]*Alloc
	monitors   map[string]*Monitor
	exceptions map[string]*Thrown
	errors     map[string]*Thrown
	slow       []IOOp // at most MaxSlow, unsorted
}

// New returns a Keeper that keeps history (at least a minute).
func New(history time.Duration) *Keeper {
	return &Keeper{keep: max(int64(history/time.Minute), 1), hosts: map[string]*host{}, layouts: map[*record.Type]*layout{}}
}

// layout is where an event type keeps the fields a view reads (-1: none).
type layout struct {
	kind                                     int
	start, duration, thread, stack           int
	gcID, name, cause, sumPauses, longest    int
	when, used, committed                    int
	class, message, path, host, port, nbytes int
	weight                                   int
}

const (
	kindNone = iota
	kindGC
	kindHeap
	kindMonitor
	kindIO
	kindException
	kindError
	kindAlloc
	kindPhase
)

var kinds = map[string]int{
	"jdk.GarbageCollection": kindGC, "jdk.GCHeapSummary": kindHeap, "jdk.JavaMonitorEnter": kindMonitor,
	"jdk.FileRead": kindIO, "jdk.FileWrite": kindIO, "jdk.SocketRead": kindIO, "jdk.SocketWrite": kindIO,
	"jdk.JavaExceptionThrow": kindException, "jdk.JavaErrorThrow": kindError, "jdk.ObjectAllocationSample": kindAlloc,
	"jdk.GCPhasePause": kindPhase,
}

func layoutOf(t *record.Type) *layout {
	idx := func(name string, k record.Kind) int {
		i := t.FieldIndex(name)
		if i < 0 || t.Fields[i].Array || t.Fields[i].Kind != k {
			return -1
		}
		return i
	}
	l := &layout{kind: kinds[t.Name]}
	l.start, l.duration = idx("startTime", record.Long), idx("duration", record.Long)
	l.thread = idx("eventThread", record.String)
	l.stack = t.FieldIndex("stackTrace")
	if l.stack >= 0 && (!t.Fields[l.stack].Array || t.Fields[l.stack].Kind != record.String) {
		l.stack = -1
	}
	l.gcID, l.name, l.cause = idx("gcId", record.Int), idx("name", record.String), idx("cause", record.String)
	l.sumPauses, l.longest = idx("sumOfPauses", record.Long), idx("longestPause", record.Long)
	l.when, l.used, l.committed = idx("when", record.String), idx("heapUsed", record.Long), idx("heapSpace.committedSize", record.Long)
	switch l.kind {
	case kindMonitor:
		l.class = idx("monitorClass", record.String)
	case kindAlloc:
		l.class, l.weight = idx("objectClass", record.String), idx("weight", record.Long)
	case kindException, kindError:
		l.class, l.message = idx("thrownClass", record.String), idx("message", record.String)
	case kindIO:
		l.path, l.host, l.port = idx("path", record.String), idx("host", record.String), idx("port", record.Int)
		l.nbytes = idx("bytesRead", record.Long)
		if l.nbytes < 0 {
			l.nbytes = idx("bytesWritten", record.Long)
		}
	}
	if l.start < 0 {
		l.kind = kindNone
	}
	return l
}

func (l *layout) long(r *record.Record, i int) int64 {
	if i < 0 {
		return 0
	}
	return r.Values[i].Int()
}

func (l *layout) str(r *record.Record, i int) string {
	if i < 0 {
		return ""
	}
	return r.Values[i].Str()
}

// Consume adds the records of b for b's host. It keeps no reference to
// b, but keeps its strings and, for the events it lists (GCs, the
// slowest I/O, an exception class's first throw), their frame lists,
// which the records share with no one but their decoder's constants.
func (k *Keeper) Consume(b *record.Batch) {
	for i := range b.Records {
		k.Add(b.Origin.Host, &b.Records[i])
	}
}

// Add adds one record of host (if a view shows it).
func (k *Keeper) Add(hostName string, r *record.Record) {
	l := k.layouts[r.Type]
	if l == nil {
		l = layoutOf(r.Type)
		k.layouts[r.Type] = l
	}
	if l.kind == kindNone {
		return
	}
	t := r.Values[l.start].Int()
	m := t / int64(time.Minute)
	k.mu.Lock()
	defer k.mu.Unlock()
	if m > k.newest {
		k.newest = m
		k.forget()
	}
	if m <= k.newest-k.keep {
		return
	}
	h := k.hosts[hostName]
	if h == nil {
		h = &host{minutes: map[int64]*minute{}}
		k.hosts[hostName] = h
	}
	h.newest = max(h.newest, m)
	switch l.kind {
	case kindGC:
		h.gcs = appendRing(h.gcs, GCPause{Time: t, ID: l.long(r, l.gcID), Name: l.str(r, l.name), Cause: l.str(r, l.cause),
			DurationNs: l.long(r, l.duration), PauseNs: l.long(r, l.sumPauses), LongestNs: l.long(r, l.longest)})
		return
	case kindPhase:
		h.phases = appendRing(h.phases, GCPhase{Time: t, ID: l.long(r, l.gcID), Name: l.str(r, l.name), DurationNs: l.long(r, l.duration)})
		return
	case kindHeap:
		if l.str(r, l.when) == "After GC" {
			h.heap = appendRing(h.heap, HeapPoint{Time: t, ID: l.long(r, l.gcID), Used: l.long(r, l.used), Committed: l.long(r, l.committed)})
		}
		return
	}
	mi := h.minutes[m]
	if mi == nil {
		mi = &minute{}
		h.minutes[m] = mi
	}
	switch l.kind {
	case kindAlloc:
		if mi.allocs == nil {
			mi.allocs = map[string]*Alloc{}
		}
		s := classEntry(mi.allocs, k.classes.Java(l.str(r, l.class)), func(c string) *Alloc { return &Alloc{Class: c} })
		s.Samples++
		s.Bytes += l.long(r, l.weight)
	case kindMonitor:
		if mi.monitors == nil {
			mi.monitors = map[string]*Monitor{}
		}
		d := l.long(r, l.duration)
		s := classEntry(mi.monitors, k.classes.Java(l.str(r, l.class)), func(c string) *Monitor { return &Monitor{Class: c} })
		s.Count++
		s.TotalNs += d
		s.MaxNs = max(s.MaxNs, d)
	case kindException, kindError:
		set := &mi.exceptions
		if l.kind == kindError {
			set = &mi.errors
		}
		if *set == nil {
			*set = map[string]*Thrown{}
		}
		s := classEntry(*set, k.classes.Java(l.str(r, l.class)), func(c string) *Thrown {
			return &Thrown{Class: c, Message: l.str(r, l.message), Stack: frames(r, l.stack)}
		})
		s.Count++
	case kindIO:
		op := IOOp{Type: r.Type.Name, DurationNs: l.long(r, l.duration), Time: t}
		if len(mi.slow) >= MaxSlow {
			j := 0
			for i := range mi.slow {
				if mi.slow[i].DurationNs < mi.slow[j].DurationNs {
					j = i
				}
			}
			if mi.slow[j].DurationNs >= op.DurationNs {
				return
			}
			mi.slow = append(mi.slow[:j], mi.slow[j+1:]...)
		}
		op.Target = l.str(r, l.path)
		if l.host >= 0 {
			op.Target = l.str(r, l.host) + ":" + strconv.FormatInt(l.long(r, l.port), 10)
		}
		op.Bytes, op.Thread, op.Stack = l.long(r, l.nbytes), l.str(r, l.thread), frames(r, l.stack)
		mi.slow = append(mi.slow, op)
	}
}

func frames(r *record.Record, i int) []string {
	if i < 0 {
		return nil
	}
	lst := r.Values[i].List()
	if lst == nil {
		return nil
	}
	out := make([]string, len(lst.Items))
	for j, it := range lst.Items {
		out[j] = it.Str()
	}
	return out
}

func classEntry[T any](m map[string]*T, class string, mk func(string) *T) *T {
	if class == "" {
		class = "[none]"
	}
	if s := m[class]; s != nil {
		return s
	}
	if len(m) >= MaxClasses {
		class = Other
		if s := m[class]; s != nil {
			return s
		}
	}
	s := mk(class)
	m[class] = s
	return s
}

func appendRing[T any](s []T, v T) []T {
	if len(s) >= MaxEvents {
		copy(s, s[1:])
		s = s[:len(s)-1]
	}
	return append(s, v)
}

// forget drops what fell out of the history (mu held).
func (k *Keeper) forget() {
	oldest := (k.newest - k.keep + 1) * int64(time.Minute)
	for name, h := range k.hosts {
		if h.newest <= k.newest-k.keep {
			delete(k.hosts, name)
			continue
		}
		for m := range h.minutes {
			if m <= k.newest-k.keep {
				delete(h.minutes, m)
			}
		}
		h.gcs = dropBefore(h.gcs, oldest, func(p GCPause) int64 { return p.Time })
		h.phases = dropBefore(h.phases, oldest, func(p GCPhase) int64 { return p.Time })
		h.heap = dropBefore(h.heap, oldest, func(p HeapPoint) int64 { return p.Time })
	}
}

func dropBefore[T any](s []T, t int64, time func(T) int64) []T {
	i := 0
	for i < len(s) && time(s[i]) < t {
		i++
	}
	return s[i:]
}

// Views answers the views of host between since and until (unix ns;
// collections, heap points and I/O operations by their start, the rest
// to the minute); nil when the host has nothing there.
func (k *Keeper) Views(ctx context.Context, hostName string, since, until int64) (*Views, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h := k.hosts[hostName]
	if h == nil {
		return nil, ctx.Err()
	}
	v := &Views{GC: GCView{Pauses: []GCPause{}, Phases: []GCPhase{}}, Heap: []HeapPoint{}, Allocations: []Alloc{}, Monitors: []Monitor{}, SlowIO: []IOOp{}, Exceptions: []Thrown{}}
	for _, p := range h.gcs {
		if p.Time >= since && p.Time <= until {
			v.GC.Pauses = append(v.GC.Pauses, p)
			v.GC.Count++
			v.GC.TotalPauseNs += p.PauseNs
			v.GC.LongestNs = max(v.GC.LongestNs, p.LongestNs)
		}
	}
	sort.SliceStable(v.GC.Pauses, func(i, j int) bool { return v.GC.Pauses[i].Time < v.GC.Pauses[j].Time })
	for _, p := range h.phases {
		if p.Time >= since && p.Time <= until {
			v.GC.Phases = append(v.GC.Phases, p)
			v.GC.PhaseCount++
			v.GC.PhaseTotalNs += p.DurationNs
			v.GC.PhaseLongestNs = max(v.GC.PhaseLongestNs, p.DurationNs)
		}
	}
	sort.SliceStable(v.GC.Phases, func(i, j int) bool { return v.GC.Phases[i].Time < v.GC.Phases[j].Time })
	for _, p := range h.heap {
		if p.Time >= since && p.Time <= until {
			v.Heap = append(v.Heap, p)
		}
	}
	sort.SliceStable(v.Heap, func(i, j int) bool { return v.Heap[i].Time < v.Heap[j].Time })
	allocs, monitors, exceptions, errs := map[string]*Alloc{}, map[string]*Monitor{}, map[string]*Thrown{}, map[string]*Thrown{}
	first, last := since/int64(time.Minute), until/int64(time.Minute)
	for m, mi := range h.minutes {
		if m < first || m > last {
			continue
		}
		for c, s := range mi.allocs {
			a := allocs[c]
			if a == nil {
				a = &Alloc{Class: c}
				allocs[c] = a
			}
			a.Samples += s.Samples
			a.Bytes += s.Bytes
		}
		for c, s := range mi.monitors {
			a := monitors[c]
			if a == nil {
				a = &Monitor{Class: c}
				monitors[c] = a
			}
			a.Count += s.Count
			a.TotalNs += s.TotalNs
			a.MaxNs = max(a.MaxNs, s.MaxNs)
		}
		mergeThrown(exceptions, mi.exceptions)
		mergeThrown(errs, mi.errors)
		for _, op := range mi.slow {
			if op.Time >= since && op.Time <= until {
				v.SlowIO = append(v.SlowIO, op)
			}
		}
	}
	if len(v.GC.Pauses) == 0 && len(v.GC.Phases) == 0 && len(v.Heap) == 0 && len(allocs) == 0 && len(monitors) == 0 && len(exceptions) == 0 && len(errs) == 0 && len(v.SlowIO) == 0 {
		return nil, ctx.Err()
	}
	for _, s := range allocs {
		v.Allocations = append(v.Allocations, *s)
	}
	sort.Slice(v.Allocations, func(i, j int) bool {
		a, b := v.Allocations[i], v.Allocations[j]
		return a.Bytes > b.Bytes || a.Bytes == b.Bytes && a.Class < b.Class
	})
	for _, s := range monitors {
		v.Monitors = append(v.Monitors, *s)
	}
	sort.Slice(v.Monitors, func(i, j int) bool {
		a, b := v.Monitors[i], v.Monitors[j]
		return a.TotalNs > b.TotalNs || a.TotalNs == b.TotalNs && a.Class < b.Class
	})
	if len(exceptions) == 0 {
		exceptions = errs
	}
	for _, s := range exceptions {
		v.Exceptions = append(v.Exceptions, *s)
	}
	sort.Slice(v.Exceptions, func(i, j int) bool {
		a, b := v.Exceptions[i], v.Exceptions[j]
		return a.Count > b.Count || a.Count == b.Count && a.Class < b.Class
	})
	sort.Slice(v.SlowIO, func(i, j int) bool { return v.SlowIO[i].DurationNs > v.SlowIO[j].DurationNs })
	if len(v.SlowIO) > MaxSlow {
		v.SlowIO = v.SlowIO[:MaxSlow]
	}
	return v, ctx.Err()
}

func mergeThrown(dst, src map[string]*Thrown) {
	for c, s := range src {
		a := dst[c]
		if a == nil {
			cp := *s
			dst[c] = &cp
			continue
		}
		a.Count += s.Count
	}
}
