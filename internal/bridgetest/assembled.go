package bridgetest

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Assembled is one trace as `tracebridge traces --json` prints it (the
// fields the clients' tests look at).
type Assembled struct {
	TraceID string          `json:"traceId"`
	Hosts   []string        `json:"hosts"`
	Broken  []string        `json:"broken"`
	Spans   []AssembledSpan `json:"spans"`
}

// AssembledSpan is one span of an Assembled trace.
type AssembledSpan struct {
	SpanID    string  `json:"spanId"`
	Parent    *string `json:"parentSpanId"`
	Operation string  `json:"operation"`
	Host      string  `json:"host"`
	Thread    string  `json:"thread"`
	Error     bool    `json:"error"`
}

// Traces runs `tracebridge traces --json dir` (the real binary) and
// returns the traces it prints; a failure of the command fails tb.
func Traces(tb testing.TB, dir string) []Assembled {
	tb.Helper()
	cmd := exec.Command(Binary(tb), "traces", "--json", dir)
	cmd.Env = CleanEnv()
	r := Exec(tb, cmd)
	if r.Code != 0 {
		tb.Fatalf("tracebridge traces --json %s exited %d\n%s", dir, r.Code, r.Stderr)
	}
	var out []Assembled
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if line == "" {
			continue
		}
		var a Assembled
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			tb.Fatalf("traces --json: %q: %v", line, err)
		}
		out = append(out, a)
	}
	return out
}

// Paths returns the path of every span of a from its root, sorted: the
// operations joined by " | ", then "@" and the span's host when withHost
// is set.
func (a Assembled) Paths(withHost bool) []string {
	byID := make(map[string]int, len(a.Spans))
	for i, s := range a.Spans {
		byID[s.SpanID] = i
	}
	out := make([]string, 0, len(a.Spans))
	for _, s := range a.Spans {
		ops := []string{s.Operation}
		seen := 0
		for p := s.Parent; p != nil && seen < len(a.Spans); seen++ {
			j, ok := byID[*p]
			if !ok {
				ops = append(ops, "<missing parent>")
				break
			}
			ops = append(ops, a.Spans[j].Operation)
			p = a.Spans[j].Parent
		}
		slices.Reverse(ops)
		path := strings.Join(ops, " | ")
		if withHost {
			path += "@" + s.Host
		}
		out = append(out, path)
	}
	slices.Sort(out)
	return out
}

// Roots returns the number of spans of a without a parent.
func (a Assembled) Roots() int {
	n := 0
	for _, s := range a.Spans {
		if s.Parent == nil {
			n++
		}
	}
	return n
}

// Invocations returns the InvocationRecords (trace.InvocationTypeName)
// of recs.
func Invocations(recs []record.Record) []trace.Invocation {
	var out []trace.Invocation
	for _, r := range recs {
		if r.Type == nil || r.Type.Name != trace.InvocationTypeName || len(r.Values) != len(trace.InvocationType.Fields) {
			continue
		}
		v := r.Values
		out = append(out, trace.Invocation{
			ID: v[trace.InvID].Int(), ProcessID: int32(v[trace.InvProcessID].Int()), Node: v[trace.InvNodeID].Str(),
			RunnableID: v[trace.InvRunnableID].Int(), CreationTime: v[trace.InvCreationTime].Int(),
			ParentID: v[trace.InvParentID].Int(), ParentProcessID: int32(v[trace.InvParentProcessID].Int()),
			ParentNode: v[trace.InvParentNodeID].Str(), ParentOrderID: int32(v[trace.InvParentOrderID].Int()),
			TraceID: v[trace.InvTraceID].Int(),
		})
	}
	return out
}

// CheckInvocations fails tb unless the InvocationRecords of recs are
// sound: one per Kieker trace at most, ids unique per node and process,
// and every parent invocation named is in recs too (so the bridge can
// link every task). It returns them.
func CheckInvocations(tb testing.TB, recs []record.Record) []trace.Invocation {
	tb.Helper()
	invs := Invocations(recs)
	type key struct {
		node string
		pid  int32
		id   int64
	}
	ids := map[key]bool{}
	traces := map[int64]bool{}
	for _, in := range invs {
		k := key{in.Node, in.ProcessID, in.ID}
		if ids[k] {
			tb.Errorf("invocation %s/%d/%d recorded twice", in.Node, in.ProcessID, in.ID)
		}
		ids[k] = true
		if traces[in.TraceID] {
			tb.Errorf("trace %d has two invocations", in.TraceID)
		}
		traces[in.TraceID] = true
	}
	for _, in := range invs {
		if in.ParentID != -1 && !ids[key{in.ParentNode, in.ParentProcessID, in.ParentID}] {
			tb.Errorf("invocation %s/%d/%d (trace %d) names parent %s/%d/%d, which is not in the log",
				in.Node, in.ProcessID, in.ID, in.TraceID, in.ParentNode, in.ParentProcessID, in.ParentID)
		}
	}
	return invs
}

// WithoutMetadataLinks returns copies of recs whose TraceMetadata name no
// parent (parentTraceId = traceId, parentOrderId = -1, a root's): what a
// pooled thread's metadata would say without explicit propagation, so
// that only the InvocationRecords can link the traces.
func WithoutMetadataLinks(recs []record.Record) []record.Record {
	out := make([]record.Record, len(recs))
	for i := range recs {
		out[i] = recs[i].Clone()
		r := &out[i]
		if r.Type != nil && r.Type.Name == record.TraceMetadata {
			r.Values[4] = r.Values[0]
			r.Values[5] = record.IntValue(-1)
		}
	}
	return out
}

// Assemble runs recs through the bridge's trace assembler (record clock)
// and returns the traces it builds.
func Assemble(recs []record.Record) []*trace.Trace {
	var out []*trace.Trace
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(t *trace.Trace) { out = append(out, t) }})
	for i := range recs {
		a.Add(&recs[i], nil)
	}
	a.Flush()
	return out
}
