package store

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// withResources gives the spans of t resources and scopes as an
// OpenTelemetry SDK sends them: one resource per service (environment
// env), one scope per component.
func withResources(t *trace.Trace, env string) *trace.Trace {
	res := map[string]*trace.Resource{}
	sc := map[string]*trace.Scope{}
	for i := range t.Spans {
		s := &t.Spans[i]
		r, ok := res[s.Service]
		if !ok {
			r = &trace.Resource{Attributes: []trace.Attr{
				{Key: "service.name", Value: s.Service, Type: trace.TypeString},
				{Key: "host.name", Value: s.Host, Type: trace.TypeString},
				{Key: "deployment.environment", Value: env, Type: trace.TypeString},
				{Key: "service.version", Value: "2.4.1", Type: trace.TypeString},
				{Key: "process.pid", Value: "4711", Type: trace.TypeInt},
				{Key: "process.executable.name", Value: "shop-server", Type: trace.TypeString},
				{Key: "process.runtime.name", Value: "go", Type: trace.TypeString},
				{Key: "process.runtime.version", Value: "go1.26.0", Type: trace.TypeString},
				{Key: "telemetry.sdk.language", Value: "go", Type: trace.TypeString},
				{Key: "telemetry.sdk.name", Value: "opentelemetry", Type: trace.TypeString},
				{Key: "telemetry.sdk.version", Value: "1.38.0", Type: trace.TypeString},
			}}
			res[s.Service] = r
			t.Resources = append(t.Resources, r)
		}
		c, ok := sc[s.Component]
		if !ok {
			c = &trace.Scope{Name: s.Component, Version: "0.9", Attributes: []trace.Attr{{Key: "scope.team", Value: "payments", Type: trace.TypeString}}}
			sc[s.Component] = c
			t.Scopes = append(t.Scopes, c)
		}
		s.Resource, s.Scope = r, c
	}
	return t
}

// TestResourcesSearchedAndKept: resource and scope attributes are kept
// with the trace (every span points at its resource and scope again
// after a reopen), and a search for a resource or scope attribute finds
// the traces that have it and no other.
func TestResourcesSearchedAndKept(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{ChunkSize: 4 << 10})
	var all []*trace.Trace
	for i := range 200 {
		env := []string{"prod", "dev"}[i%2]
		all = append(all, withResources(mkTrace(i, []string{"alpha", "beta"}[i%2/1%2], 1+i%4, int64(1_000_000+i*1000), 100, false), env))
	}
	all = append(all, mkTrace(500, "alpha", 3, 5_000_000, 100, false)) // no resources
	if _, err := s.Append(all); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	count := func(q Query) int {
		t.Helper()
		q.Limit = 1000
		p, err := s.Search(q)
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Traces)
	}
	for _, c := range []struct {
		key, value string
		want       int
	}{
		{"deployment.environment", "prod", 100},
		{"deployment.environment", "dev", 100},
		{"deployment.environment", "test", 0},
		{"telemetry.sdk.language", "go", 200},
		{"process.pid", "4711", 200},
		{"scope.team", "payments", 200},
		{trace.ScopeNameKey, "db.Client", 150}, // traces with more than one span
		{trace.ScopeVersionKey, "0.9", 200},
	} {
		if got := count(Query{Attrs: []trace.Attr{{Key: c.key, Value: c.value}}}); got != c.want {
			t.Errorf("--attr %s=%s: %d traces, want %d", c.key, c.value, got, c.want)
		}
	}
	if got := count(Query{Attrs: []trace.Attr{{Key: "deployment.environment", Value: "prod"}, {Key: "n", Value: "4"}}}); got != 1 {
		t.Errorf("a resource and a span attribute: %d traces, want 1", got)
	}
	check := func(s *Store) {
		t.Helper()
		for _, i := range []int{0, 7, 200} {
			want := all[i]
			got, err := s.Get(want.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Resources) != len(want.Resources) || len(got.Scopes) != len(want.Scopes) {
				t.Fatalf("trace %d: %d resources and %d scopes, want %d and %d", i, len(got.Resources), len(got.Scopes), len(want.Resources), len(want.Scopes))
			}
			for j := range got.Spans {
				g, w := &got.Spans[j], &want.Spans[j]
				if !g.Resource.Equal(w.Resource) || !g.Scope.Equal(w.Scope) {
					t.Errorf("trace %d span %d: resource %+v scope %+v, want %+v %+v", i, j, g.Resource, g.Scope, w.Resource, w.Scope)
				}
				if g.Resource != nil && got.ResourceIndex(g.Resource) < 0 || g.Scope != nil && got.ScopeIndex(g.Scope) < 0 {
					t.Errorf("trace %d span %d points outside its trace's tables", i, j)
				}
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	check(s)
	if got := count(Query{Attrs: []trace.Attr{{Key: "deployment.environment", Value: "prod"}}}); got != 100 {
		t.Errorf("after a reopen, deployment.environment=prod: %d traces, want 100", got)
	}
}

// TestResourcesOncePerTrace: a trace's resource and scope attributes are
// stored once, not per span: a trace of many spans of one resource grows
// by the resource once and by two bytes (its indexes) per span.
func TestResourcesOncePerTrace(t *testing.T) {
	e := encoder{syms: newSymbols()}
	size := func(n int, resources bool) int {
		tr := mkTrace(1, "alpha", n, 1000, 100, false)
		for i := range tr.Spans {
			tr.Spans[i].Service = "db" // one resource, one scope…
			tr.Spans[i].Component = "db.Client"
		}
		if resources {
			withResources(tr, "prod")
		}
		return len(e.encodeTrace(tr))
	}
	size(1000, true) // every symbol defined, with the ids it keeps
	base1, with1 := size(1, false), size(1, true)
	table := with1 - base1 - 2
	if table <= 0 {
		t.Fatalf("a trace of one span: %d bytes without resources, %d with", base1, with1)
	}
	for _, n := range []int{10, 1000} {
		base, with := size(n, false), size(n, true)
		if grow := with - base; grow != table+2*n {
			t.Errorf("%d spans: resources add %d bytes, want %d (the tables %d once, 2 per span)", n, grow, table+2*n, table)
		}
		t.Logf("%d spans: %d bytes, %d with resources (%.2f more per span)", n, base, with, float64(with-base)/float64(n))
	}
}

// BenchmarkAppendResources measures Append of traces of 4 spans without
// and with resources and scopes (shared by the traces of a service, as
// the assembler shares them).
func BenchmarkAppendResources(b *testing.B) {
	for _, with := range []bool{false, true} {
		name := map[bool]string{false: "none", true: "resources"}[with]
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			shared := map[string]*trace.Resource{}
			scopes := map[string]*trace.Scope{}
			ts := make([]*trace.Trace, 1000)
			for i := range ts {
				ts[i] = mkTrace(i, "alpha", 4, int64(1_000_000+i*1000), 100, false)
				if with {
					withResources(ts[i], "prod")
					for j, r := range ts[i].Resources {
						key := r.Attributes[0].Value
						if x, ok := shared[key]; ok {
							ts[i].Resources[j] = x
						} else {
							shared[key] = r
						}
					}
					for j, c := range ts[i].Scopes {
						if x, ok := scopes[c.Name]; ok {
							ts[i].Scopes[j] = x
						} else {
							scopes[c.Name] = c
						}
					}
					for k := range ts[i].Spans {
						sp := &ts[i].Spans[k]
						sp.Resource, sp.Scope = shared[sp.Resource.Attributes[0].Value], scopes[sp.Scope.Name]
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := ts[i%len(ts)]
				t.ID.Lo = uint64(i + 1)
				if _, err := s.Append([]*trace.Trace{t}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
