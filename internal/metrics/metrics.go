// Package metrics defines tracebridge's Prometheus metrics and the small
// handles sources and sinks use to update them without touching Prometheus
// per record: counts are gathered per batch.
//
// All handles are nil-safe: a nil *Receiver or *Sink counts nothing, so code
// that runs without metrics (tests, embedding) needs no checks.
//
// Concurrency: every method is safe for concurrent use.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Registry holds one bridge's metrics.
type Registry struct {
	reg *prometheus.Registry

	records      *prometheus.CounterVec
	bytes        *prometheus.CounterVec
	decodeErrors *prometheus.CounterVec
	connections  *prometheus.GaugeVec
	connTotal    *prometheus.CounterVec
	rejected     *prometheus.CounterVec
	memRefused   *prometheus.CounterVec
	queueDepth   prometheus.GaugeFunc
	sinkLatency  *prometheus.HistogramVec
	sinkErrors   *prometheus.CounterVec
	sinkRecords  *prometheus.CounterVec
	dropped      *prometheus.CounterVec
	overflow     *prometheus.CounterVec
	sinkQueue    *prometheus.GaugeVec

	queueFn func() float64
	mu      sync.Mutex

	sinkTraces, sinkTraceSpans *prometheus.CounterVec
	traceFn                    func() TraceCounts
	memFn                      func() MemoryFigures
}

// MemoryFigures are the memory limiter's figures (internal/memlimit).
type MemoryFigures struct {
	Limit, Usage int64
	Refusing     bool
}

// TraceCounts are the trace assembler's counts (trace.Stats).
type TraceCounts struct {
	Records, Traces, Spans, Broken, Untraced, Evicted, Early, Parts, Open, Duplicates int64
}

// New returns a registry with Go runtime and process metrics and
// tracebridge's own, all prefixed tracebridge_.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.records = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_records_received_total", Help: "Records decoded, by receiver and record type.",
	}, []string{"receiver", "type"})
	r.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_bytes_received_total", Help: "Bytes read, by receiver.",
	}, []string{"receiver"})
	r.decodeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_decode_errors_total", Help: "Malformed inputs (connections closed, messages rejected), by receiver.",
	}, []string{"receiver"})
	r.connections = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tracebridge_connections", Help: "Open connections, by receiver.",
	}, []string{"receiver"})
	r.connTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_connections_total", Help: "Connections accepted or made, by receiver.",
	}, []string{"receiver"})
	r.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_connections_rejected_total", Help: "Connections refused because of the connection limit, by receiver.",
	}, []string{"receiver"})
	r.memRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_memory_refusals_total", Help: "Requests, packets, reads or messages a receiver refused or held back because the process was near its memory limit, by receiver.",
	}, []string{"receiver"})
	mem := func(name, help string, f func(MemoryFigures) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			r.mu.Lock()
			fn := r.memFn
			r.mu.Unlock()
			if fn == nil {
				return 0
			}
			return f(fn())
		})
	}
	r.reg.MustRegister(r.memRefused,
		mem("tracebridge_memory_limit_bytes", "The process's memory limit (memory_limit).", func(m MemoryFigures) float64 { return float64(m.Limit) }),
		mem("tracebridge_memory_usage_bytes", "Memory in use as the limiter measures it: the live heap of the last garbage collection plus the Go runtime's memory outside the heap.", func(m MemoryFigures) float64 { return float64(m.Usage) }),
		mem("tracebridge_memory_refusing", "1 while receivers refuse new data because the process is near its memory limit.", func(m MemoryFigures) float64 {
			if m.Refusing {
				return 1
			}
			return 0
		}))
	r.queueDepth = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tracebridge_queue_depth_batches", Help: "Batches waiting between receivers and sinks.",
	}, func() float64 {
		r.mu.Lock()
		f := r.queueFn
		r.mu.Unlock()
		if f == nil {
			return 0
		}
		return f()
	})
	r.sinkLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tracebridge_sink_batch_seconds", Help: "Time a sink takes to consume one batch, by sink.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
	}, []string{"sink"})
	r.sinkErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_sink_errors_total", Help: "Batches a sink failed to consume, by sink.",
	}, []string{"sink"})
	r.sinkRecords = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_sink_records_total", Help: "Records a sink consumed, by sink.",
	}, []string{"sink"})
	r.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_sink_dropped_records_total", Help: "Records a sink dropped (e.g. a forward target unreachable), by sink.",
	}, []string{"sink"})
	r.overflow = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_sink_overflow_records_total", Help: "Records a best-effort sink lost because its queue was full (the oldest batch is dropped), by sink.",
	}, []string{"sink"})
	r.sinkQueue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tracebridge_sink_queue_batches", Help: "Batches waiting in a sink's queue, by sink.",
	}, []string{"sink"})
	r.sinkTraces = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_sink_traces_total", Help: "Assembled traces a sink consumed, by sink.",
	}, []string{"sink"})
	r.sinkTraceSpans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracebridge_sink_trace_spans_total", Help: "Spans of the assembled traces a sink consumed, by sink.",
	}, []string{"sink"})
	traces := func(name, help string, counter bool, f func(TraceCounts) int64) prometheus.Collector {
		get := func() float64 {
			r.mu.Lock()
			fn := r.traceFn
			r.mu.Unlock()
			if fn == nil {
				return 0
			}
			return float64(f(fn()))
		}
		if counter {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, get)
		}
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, get)
	}
	r.reg.MustRegister(r.sinkTraces, r.sinkTraceSpans,
		traces("tracebridge_trace_records_total", "Records the trace assembler took (events, metadata, executions, spans, invocations).", true, func(c TraceCounts) int64 { return c.Records }),
		traces("tracebridge_traces_assembled_total", "Traces assembled (a trace emitted in parts counts once per part).", true, func(c TraceCounts) int64 { return c.Traces }),
		traces("tracebridge_trace_spans_total", "Spans of the traces assembled.", true, func(c TraceCounts) int64 { return c.Spans }),
		traces("tracebridge_traces_broken_total", "Traces assembled and marked broken (a missing parent, an unclosed call, …).", true, func(c TraceCounts) int64 { return c.Broken }),
		traces("tracebridge_untraced_executions_total", "OperationExecutionRecords with traceId -1 (outside any trace).", true, func(c TraceCounts) int64 { return c.Untraced }),
		traces("tracebridge_traces_evicted_total", "Traces completed early because max_open_traces was reached.", true, func(c TraceCounts) int64 { return c.Evicted }),
		traces("tracebridge_traces_early_total", "Kieker traces completed before their window ended because the events held reached their share of memory (they looked whole).", true, func(c TraceCounts) int64 { return c.Early }),
		traces("tracebridge_trace_parts_total", "Parts emitted of traces larger than max_spans.", true, func(c TraceCounts) int64 { return c.Parts }),
		traces("tracebridge_trace_duplicates_total", "Records dropped as copies of one already in their trace (same key and content: a log replayed twice).", true, func(c TraceCounts) int64 { return c.Duplicates }),
		traces("tracebridge_traces_open", "Traces being assembled (waiting for their window).", false, func(c TraceCounts) int64 { return c.Open }),
	)
	r.reg.MustRegister(r.records, r.bytes, r.decodeErrors, r.connections, r.connTotal, r.rejected,
		r.queueDepth, r.sinkLatency, r.sinkErrors, r.sinkRecords, r.dropped, r.overflow, r.sinkQueue,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves the metrics in Prometheus' text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

// Register adds collectors of a package that keeps its own metrics (the
// cluster node's, internal/cluster); a nil Registry takes none.
func (r *Registry) Register(cs ...prometheus.Collector) error {
	if r == nil {
		return nil
	}
	for _, c := range cs {
		if err := r.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Gatherer exposes the underlying registry (tests, embedding).
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// SetTraceStats installs the function that reports the trace
// assembler's counts.
func (r *Registry) SetTraceStats(f func() TraceCounts) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.traceFn = f
	r.mu.Unlock()
}

// SetMemory installs the function that reports the memory limiter's
// figures.
func (r *Registry) SetMemory(f func() MemoryFigures) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.memFn = f
	r.mu.Unlock()
}

// SetQueueDepth installs the function that reports the queue depth.
func (r *Registry) SetQueueDepth(f func() int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.queueFn = func() float64 { return float64(f()) }
	r.mu.Unlock()
}

// Receiver returns the handle of the named receiver.
func (r *Registry) Receiver(name string) *Receiver {
	if r == nil {
		return nil
	}
	return &Receiver{
		name:         name,
		reg:          r,
		bytes:        r.bytes.WithLabelValues(name),
		decodeErrors: r.decodeErrors.WithLabelValues(name),
		connections:  r.connections.WithLabelValues(name),
		connTotal:    r.connTotal.WithLabelValues(name),
		rejected:     r.rejected.WithLabelValues(name),
		memRefused:   r.memRefused.WithLabelValues(name),
		byType:       map[*record.Type]prometheus.Counter{},
	}
}

// Sink returns the handle of the named sink.
func (r *Registry) Sink(name string) *Sink {
	if r == nil {
		return nil
	}
	return &Sink{
		latency:  r.sinkLatency.WithLabelValues(name),
		errors:   r.sinkErrors.WithLabelValues(name),
		records:  r.sinkRecords.WithLabelValues(name),
		dropped:  r.dropped.WithLabelValues(name),
		overflow: r.overflow.WithLabelValues(name),
		queued:   r.sinkQueue.WithLabelValues(name),
		traces:   r.sinkTraces.WithLabelValues(name),
		tspans:   r.sinkTraceSpans.WithLabelValues(name),
	}
}

// Receiver counts what one receiver takes in.
type Receiver struct {
	name         string
	reg          *Registry
	bytes        prometheus.Counter
	decodeErrors prometheus.Counter
	connections  prometheus.Gauge
	connTotal    prometheus.Counter
	rejected     prometheus.Counter
	memRefused   prometheus.Counter

	mu     sync.RWMutex
	byType map[*record.Type]prometheus.Counter
}

// Name returns the receiver's name.
func (r *Receiver) Name() string {
	if r == nil {
		return ""
	}
	return r.name
}

// Records counts the records of b by type. It is meant to be called once
// per batch.
func (r *Receiver) Records(b *record.Batch) {
	if r == nil || b.Len() == 0 {
		return
	}
	if b.Frames.Only() { // a batch of frames only: the decoder counted them
		for _, c := range b.Frames.Counts {
			r.counter(c.Type).Add(float64(c.N))
		}
		return
	}
	// Count per type locally (a batch holds few types), then add to each
	// type's counter once: no lock or map lookup per record.
	type tally struct {
		t *record.Type
		n int
	}
	var local [8]tally
	used := 0
	for i := range b.Records {
		t := b.Records[i].Type
		j := 0
		for j < used && local[j].t != t {
			j++
		}
		if j == used {
			if used == len(local) {
				r.counter(t).Inc()
				continue
			}
			local[used] = tally{t: t}
			used++
		}
		local[j].n++
	}
	for _, c := range local[:used] {
		r.counter(c.t).Add(float64(c.n))
	}
}

func (r *Receiver) counter(t *record.Type) prometheus.Counter {
	r.mu.RLock()
	c, ok := r.byType[t]
	r.mu.RUnlock()
	if ok {
		return c
	}
	c = r.reg.records.WithLabelValues(r.name, t.Name)
	r.mu.Lock()
	r.byType[t] = c
	r.mu.Unlock()
	return c
}

// Bytes counts bytes read.
func (r *Receiver) Bytes(n int) {
	if r != nil && n > 0 {
		r.bytes.Add(float64(n))
	}
}

// DecodeError counts a malformed input.
func (r *Receiver) DecodeError() {
	if r != nil {
		r.decodeErrors.Inc()
	}
}

// ConnOpened counts a new connection.
func (r *Receiver) ConnOpened() {
	if r != nil {
		r.connTotal.Inc()
		r.connections.Inc()
	}
}

// ConnClosed counts a connection ending.
func (r *Receiver) ConnClosed() {
	if r != nil {
		r.connections.Dec()
	}
}

// ConnRejected counts a connection refused by the connection limit.
func (r *Receiver) ConnRejected() {
	if r != nil {
		r.rejected.Inc()
	}
}

// MemoryRefused counts data refused or held back because the process
// was near its memory limit (once per request, packet, wait or message).
func (r *Receiver) MemoryRefused() {
	if r != nil {
		r.memRefused.Inc()
	}
}

// Sink counts what one sink does.
type Sink struct {
	latency  prometheus.Observer
	errors   prometheus.Counter
	records  prometheus.Counter
	dropped  prometheus.Counter
	overflow prometheus.Counter
	queued   prometheus.Gauge
	traces   prometheus.Counter
	tspans   prometheus.Counter
}

// Traces counts assembled traces (and their spans) a sink consumed.
func (s *Sink) Traces(traces, spans int) {
	if s == nil {
		return
	}
	s.traces.Add(float64(traces))
	s.tspans.Add(float64(spans))
}

// Overflow counts records a best-effort sink lost because it fell behind.
func (s *Sink) Overflow(n int) {
	if s != nil && n > 0 {
		s.overflow.Add(float64(n))
	}
}

// OverflowCounter exposes the overflow counter (tests).
func (s *Sink) OverflowCounter() prometheus.Counter { return s.overflow }

// Queued sets the number of batches waiting in the sink's queue.
func (s *Sink) Queued(n int) {
	if s != nil {
		s.queued.Set(float64(n))
	}
}

// Consumed records one batch of n records that took d; err marks a failure.
func (s *Sink) Consumed(n int, d time.Duration, err error) {
	if s == nil {
		return
	}
	s.latency.Observe(d.Seconds())
	if err != nil {
		s.errors.Inc()
		return
	}
	s.records.Add(float64(n))
}

// Passed counts records a sink that takes traces only was spared (they
// count as consumed, with no latency).
func (s *Sink) Passed(n int) {
	if s != nil {
		s.records.Add(float64(n))
	}
}

// Dropped counts records a sink could not deliver and gave up on.
func (s *Sink) Dropped(n int) {
	if s != nil && n > 0 {
		s.dropped.Add(float64(n))
	}
}
