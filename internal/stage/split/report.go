package split

import (
	"errors"
	"strconv"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// ErrFinished is returned by Consume after Finish.
var ErrFinished = errors.New("split: stage finished")

// Options configure a Stage or a Merger. Zero values mean the defaults.
// Merging a split log restores it exactly when the Merger runs with the
// limits the split ran with (the defaults on both sides, for instance):
// both sides then forget the same traces at the same records.
type Options struct {
	// MaxOpenTraces bounds the event traces (TraceMetadata seen, last call
	// not yet returned) tracked at once (default 65536). A new trace over
	// the limit evicts the least recently active one, which is reported;
	// the rest of it passes through unsplit.
	MaxOpenTraces int
	// MaxDepth bounds the open calls of one trace (default 4096); a trace
	// nesting deeper is reported and the rest of it passes through
	// unsplit.
	MaxDepth int
	// MaxFrames bounds the open calls of all traces together (default
	// 1<<20, 16 bytes each); the trace whose call goes over it is treated
	// as by MaxDepth.
	MaxFrames int
	// MaxBuffered bounds the records held back while OperationExecution-
	// Record traces are incomplete (default 65536; a Merger holds up to
	// three times as many, the size of a split family). When the window
	// is full the oldest incomplete trace is reported and passes through
	// unsplit.
	MaxBuffered int
	// MaxHold bounds how long records wait behind an incomplete
	// OperationExecutionRecord trace (default 30 s; negative: no limit):
	// an older trace is reported and passes through unsplit. It is
	// checked by Consume and Flush; a bridge calls Flush periodically so
	// that held records move on when no input arrives. Runs that must be
	// reproducible (tracebridge split) turn it off.
	MaxHold time.Duration
	// Now is the clock for MaxHold; nil means time.Now.
	Now func() time.Time
	// Catalog provides the TraceMetadata type of the records announcing
	// partial OperationExecutionRecord traces; nil means record.Builtin().
	Catalog *record.Catalog
	// OnMalformed hears about every trace passed through (partly) unsplit.
	// It is called on the goroutine calling Consume or Finish and must not
	// call back into the stage.
	OnMalformed func(Malformed)
}

// Defaults of Options.
const (
	DefaultMaxOpenTraces = 65536
	DefaultMaxDepth      = 4096
	DefaultMaxFrames     = 1 << 20
	DefaultMaxBuffered   = 65536
	DefaultMaxHold       = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.MaxOpenTraces <= 0 {
		o.MaxOpenTraces = DefaultMaxOpenTraces
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxFrames <= 0 {
		o.MaxFrames = DefaultMaxFrames
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = DefaultMaxBuffered
	}
	if o.MaxHold == 0 {
		o.MaxHold = DefaultMaxHold
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Catalog == nil {
		o.Catalog = record.Builtin()
	}
	return o
}

// Malformed describes a trace that was passed through (from the record
// named on) unsplit.
type Malformed struct {
	TraceID int64
	Reason  string // e.g. "orderIndex 7 where 5 was expected"
}

func (m Malformed) String() string { return "trace " + itoa(m.TraceID) + ": " + m.Reason }

// Stats count what a Stage or a Merger did.
type Stats struct {
	RecordsIn, RecordsOut int64
	// TracesIn counts the traces read: TraceMetadata records and
	// OperationExecutionRecord traces (for a Merger, partial traces count
	// one each). TracesOut counts the traces written.
	TracesIn, TracesOut int64
	// Partial counts the partial traces a Stage cut out, or a Merger put
	// back into their parents.
	Partial int64
	// MaxNesting is the deepest nesting of partial traces (1: a trace
	// that was not cut); MaxDepth the deepest call stack seen.
	MaxNesting, MaxDepth int
	// Malformed counts the traces reported through OnMalformed;
	// MalformedIDs holds the first few of their ids.
	Malformed    int64
	MalformedIDs []int64
	// Evicted counts traces forgotten because of MaxOpenTraces.
	Evicted int64
}

// maxMalformedIDs is how many malformed trace ids Stats keeps.
const maxMalformedIDs = 10

func (s *Stats) malformed(m Malformed, hook func(Malformed)) {
	s.Malformed++
	if len(s.MalformedIDs) < maxMalformedIDs {
		s.MalformedIDs = append(s.MalformedIDs, m.TraceID)
	}
	if hook != nil {
		hook(m)
	}
}

// Add adds o's counts to s (the maxima are the larger; the ids the first
// ones), as for the logs of one command.
func (s *Stats) Add(o Stats) {
	s.RecordsIn += o.RecordsIn
	s.RecordsOut += o.RecordsOut
	s.TracesIn += o.TracesIn
	s.TracesOut += o.TracesOut
	s.Partial += o.Partial
	s.MaxNesting = max(s.MaxNesting, o.MaxNesting)
	s.MaxDepth = max(s.MaxDepth, o.MaxDepth)
	s.Malformed += o.Malformed
	s.Evicted += o.Evicted
	for _, id := range o.MalformedIDs {
		if len(s.MalformedIDs) < maxMalformedIDs {
			s.MalformedIDs = append(s.MalformedIDs, id)
		}
	}
}

func (s Stats) clone() Stats {
	s.MalformedIDs = append([]int64(nil), s.MalformedIDs...)
	return s
}

// idSet remembers up to a fixed number of ids, forgetting the oldest.
type idSet struct {
	m    map[int64]struct{}
	ring []int64
	pos  int
}

const idSetSize = 4096

func (s *idSet) has(id int64) bool {
	_, ok := s.m[id]
	return ok
}

func (s *idSet) add(id int64) {
	if s.has(id) {
		return
	}
	if s.m == nil {
		s.m = make(map[int64]struct{}, 64)
		s.ring = make([]int64, 0, 64)
	}
	if len(s.ring) < idSetSize {
		s.ring = append(s.ring, id)
	} else {
		delete(s.m, s.ring[s.pos])
		s.ring[s.pos] = id
		s.pos = (s.pos + 1) % idSetSize
	}
	s.m[id] = struct{}{}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
