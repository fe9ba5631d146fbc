package store

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestSearchWalksBlocksByStart checks the searches that walk a block's rows
// by start and stop early against every trace filtered and sorted by hand:
// traces arrive out of start order, several blocks and heads of each host
// overlap in time, and each query is read whole and in pages.
func TestSearchWalksBlocksByStart(t *testing.T) {
	s := open(t, t.TempDir(), Options{ChunkSize: 1 << 10, PageSize: 1 << 10, HeadSize: 4 << 10})
	rng := rand.New(rand.NewPCG(3, 4))
	hosts := []string{"alpha", "beta", "gamma"}
	var all []*trace.Trace
	for i := range 900 {
		// Starts spread over the whole range whatever the arrival order,
		// some shared (ties broken by id).
		start := int64(1_000_000 + rng.IntN(400)*1000)
		all = append(all, mkTrace(i, hosts[rng.IntN(len(hosts))], 1+rng.IntN(4), start, int64(100+rng.IntN(1000)), rng.IntN(9) == 0))
	}
	for i := 0; i < len(all); i += 50 {
		if _, err := s.Append(all[i : i+50]); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, s)
	// More traces left in heads.
	for i := range 60 {
		tr := mkTrace(900+i, hosts[i%3], 2, int64(1_000_000+rng.IntN(400)*1000), 500, i%5 == 0)
		all = append(all, tr)
	}
	if _, err := s.Append(all[900:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, h := range hosts {
		blocks += blocksOf(s, h)
	}
	if blocks < 6 {
		t.Fatalf("%d blocks: the test wants several blocks a host", blocks)
	}
	errs := func(tr *trace.Trace) bool { return tr.Errors() > 0 }
	text := func(tr *trace.Trace, sub string) bool {
		return slices.ContainsFunc(tr.Spans, func(sp trace.Span) bool {
			return strings.Contains(strings.ToLower(sp.Operation), sub) || sp.Events != nil && strings.Contains(sp.Events[0].Attributes[0].Value, sub)
		})
	}
	cases := []struct {
		name string
		q    Query
		want func(tr *trace.Trace) bool
	}{
		{"all", Query{}, func(*trace.Trace) bool { return true }},
		{"errors", Query{Errors: true}, errs},
		{"host", Query{Hosts: []string{"beta"}}, func(tr *trace.Trace) bool { return tr.Spans[0].Host == "beta" }},
		{"time range", Query{Since: 1_100_000, Until: 1_200_000}, func(tr *trace.Trace) bool { return tr.Start() >= 1_100_000 && tr.Start() <= 1_200_000 }},
		{"min duration", Query{MinDuration: 900 * time.Nanosecond}, func(tr *trace.Trace) bool { return tr.Duration() >= 900 }},
		{"attribute", Query{Attrs: []trace.Attr{{Key: "user", Value: "u3"}}}, func(tr *trace.Trace) bool { return tr.Spans[0].Attributes[1].Value == "u3" }},
		{"text", Query{Text: "timed out", Deep: true}, func(tr *trace.Trace) bool { return text(tr, "timed out") }},
		{"regex", Query{Regex: regexp.MustCompile(`FROM t3$`), Deep: true}, func(tr *trace.Trace) bool { return len(tr.Spans) > 3 }},
		{"regex with a literal prefix", Query{Regex: regexp.MustCompile(`query timed out after 1[0-9]ms`), Deep: true}, func(tr *trace.Trace) bool { return text(tr, "timed out") }},
		{"errors of a host from a time", Query{Errors: true, Hosts: []string{"gamma"}, Since: 1_150_000}, func(tr *trace.Trace) bool {
			return errs(tr) && tr.Spans[0].Host == "gamma" && tr.Start() >= 1_150_000
		}},
	}
	for _, c := range cases {
		for _, oldest := range []bool{false, true} {
			var want []string
			sorted := slices.Clone(all)
			slices.SortFunc(sorted, func(a, b *trace.Trace) int {
				x := cmpPos(cursorPos{start: a.Start(), id: a.ID}, cursorPos{start: b.Start(), id: b.ID})
				if !oldest {
					x = -x
				}
				return x
			})
			for _, tr := range sorted {
				if c.want(tr) {
					want = append(want, tr.ID.String())
				}
			}
			if len(want) == 0 {
				t.Fatalf("%s: nothing to find", c.name)
			}
			for _, limit := range []int{1, 7, 20, 5000} {
				var got []string
				q := c.q
				q.Oldest, q.Limit = oldest, limit
				for pages := 0; ; pages++ {
					p, err := s.Search(q)
					if err != nil {
						t.Fatal(err)
					}
					if p.Partial {
						t.Fatalf("%s: partial", c.name)
					}
					for _, x := range p.Traces {
						got = append(got, x.TraceID)
					}
					if !p.More || pages > 1000 {
						break
					}
					q.Cursor = p.Cursor
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%s oldest=%v limit=%d (-want +got):\n%s", c.name, oldest, limit, d)
				}
				// The first page alone is the best limit traces.
				q.Cursor = ""
				p, err := s.Search(q)
				if err != nil {
					t.Fatal(err)
				}
				// More is exact where the rows decide; with span
				// conditions it may say more when there is none.
				needs := len(c.q.Attrs) > 0 || c.q.Text != "" || c.q.Regex != nil
				if n := min(limit, len(want)); len(p.Traces) != n || len(want) > limit && !p.More || !needs && p.More != (len(want) > limit) {
					t.Errorf("%s oldest=%v limit=%d: first page %d traces, more %v; want %d of %d", c.name, oldest, limit, len(p.Traces), p.More, n, len(want))
				}
			}
		}
	}
}

func cmpPos(a, b cursorPos) int {
	switch {
	case a.start != b.start:
		return cmpInt(a.start, b.start)
	case a.id.Hi != b.id.Hi:
		return cmpInt(int64(a.id.Hi), int64(b.id.Hi))
	}
	return cmpInt(int64(a.id.Lo), int64(b.id.Lo))
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
