package bridgetest

import (
	"encoding/json"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
)

// Account is what a client's example program says it did.
type Account struct {
	// Expect holds the call tree of every trace it ran ("expect TREE"
	// lines), in CallTrees' notation.
	Expect []string
	// Stats holds its client's statistics ("stats JSON" lines), one per
	// process that monitored.
	Stats []map[string]any
}

// ParseAccount reads an example's account from its output; an output
// without a stats line fails tb.
func ParseAccount(tb testing.TB, r Result) Account {
	tb.Helper()
	var a Account
	for _, line := range strings.Split(r.Stdout, "\n") {
		if tree, ok := strings.CutPrefix(line, "expect "); ok {
			a.Expect = append(a.Expect, tree)
		}
		if js, ok := strings.CutPrefix(line, "stats "); ok {
			var s map[string]any
			if err := json.Unmarshal([]byte(js), &s); err != nil {
				tb.Fatalf("stats line %q: %v", line, err)
			}
			a.Stats = append(a.Stats, s)
		}
	}
	if len(a.Stats) == 0 {
		tb.Fatalf("no stats line\nstdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	}
	return a
}

// CallTrees rebuilds the call tree of every trace in recs, one string per
// trace in no particular order: its events in orderIndex order, ">OP" for
// a Before, "<OP" for an After and "!OP" for a failed After, separated by
// spaces (a trace's SplitEvents and JoinEvents take order indexes but are
// not shown). It fails tb unless every trace has one TraceMetadata, its
// events' orderIndex run 0..n-1, and every After or failed After closes
// the innermost open Before of the same operation.
func CallTrees(tb testing.TB, recs []record.Record) []string {
	tb.Helper()
	type ev struct {
		order int64
		s     string
	}
	sym := map[string]string{record.BeforeOperationEvent: ">", record.AfterOperationEvent: "<", record.AfterOperationFailedEvent: "!"}
	events := map[int64][]ev{}
	meta := map[int64]int{}
	for _, r := range recs {
		switch r.Type.Name {
		case record.TraceMetadata:
			meta[r.Values[0].Int()]++
		case record.BeforeOperationEvent, record.AfterOperationEvent, record.AfterOperationFailedEvent:
			tr := r.Values[1].Int()
			events[tr] = append(events[tr], ev{r.Values[2].Int(), sym[r.Type.Name] + r.Values[3].Str()})
		case record.SplitEvent, record.JoinEvent:
			tr := r.Values[1].Int()
			events[tr] = append(events[tr], ev{r.Values[2].Int(), ""})
		}
	}
	var trees []string
	for tr, evs := range events {
		if meta[tr] != 1 {
			tb.Errorf("trace %d has %d TraceMetadata records", tr, meta[tr])
		}
		sort.Slice(evs, func(i, j int) bool { return evs[i].order < evs[j].order })
		var parts, stack []string
		for i, e := range evs {
			if e.order != int64(i) {
				tb.Errorf("trace %d: event %d has orderIndex %d", tr, i, e.order)
			}
			if e.s == "" { // a SplitEvent or JoinEvent
				continue
			}
			op := e.s[1:]
			if e.s[0] == '>' {
				stack = append(stack, op)
			} else if len(stack) == 0 || stack[len(stack)-1] != op {
				tb.Errorf("trace %d: %s closes %v", tr, e.s, stack)
			} else {
				stack = stack[:len(stack)-1]
			}
			parts = append(parts, e.s)
		}
		if len(stack) != 0 {
			tb.Errorf("trace %d: calls left open: %v", tr, stack)
		}
		trees = append(trees, strings.Join(parts, " "))
	}
	return trees
}

// Installed returns the path of the program name (found on the PATH, else
// /usr/bin/name). When it is not installed the test is skipped, or fails
// when TRACEBRIDGE_REQUIRE_SERVICES is set.
func Installed(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		p = "/usr/bin/" + name
	}
	servicetest.RequireBinary(tb, p, name)
	return p
}
