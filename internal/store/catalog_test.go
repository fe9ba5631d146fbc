package store

import (
	"slices"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestCatalogKeptAndRebuilt: the catalogue lists every service (a span's
// service, else its host, else unknown_service), every operation with its
// kind and every trace name as soon as the traces are appended, reads
// them back from the index after a reopen, and a rebuild from the
// segments alone finds the same.
func TestCatalogKeptAndRebuilt(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{ChunkSize: 4 << 10, HeadSize: 16 << 10})
	var all []*trace.Trace
	for i := range 50 {
		all = append(all, mkTrace(i, []string{"alpha", "beta"}[i%2], 1+i%3, int64(1_000_000+i*1000), 100, false))
	}
	// A span without a service (its host names it) and one with neither.
	hostOnly := mkTrace(100, "gamma", 1, 2_000_000, 10, false)
	hostOnly.Spans[0].Service = ""
	hostOnly.Spans[0].Kind = trace.KindServer
	nameless := mkTrace(101, "", 1, 2_000_100, 10, false)
	nameless.Spans[0].Service, nameless.Spans[0].Host = "", ""
	all = append(all, hostOnly, nameless)
	if _, err := s.Append(all); err != nil {
		t.Fatal(err)
	}
	wantSvcs := []string{"db", "gamma", trace.UnknownService, "web-alpha", "web-beta"}
	slices.Sort(wantSvcs)
	check := func(when string, s *Store) {
		t.Helper()
		if got := s.Services(); !slices.Equal(got, wantSvcs) {
			t.Errorf("%s: services %v, want %v", when, got, wantSvcs)
		}
		if ops := s.Operations("gamma"); len(ops) != 1 || ops[0] != (OpKind{"GET /item/0", trace.KindServer}) {
			t.Errorf("%s: operations of gamma %v", when, ops)
		}
		if ops := s.Operations("db"); len(ops) != 2 {
			t.Errorf("%s: operations of db %v, want the two SELECTs", when, ops)
		}
		if vs, vh, ok := s.ServiceSource("gamma"); !ok || vs || !vh {
			t.Errorf("%s: gamma via service %v, via host %v, seen %v", when, vs, vh, ok)
		}
		if vs, vh, ok := s.ServiceSource("web-alpha"); !ok || !vs || vh {
			t.Errorf("%s: web-alpha via service %v, via host %v, seen %v", when, vs, vh, ok)
		}
		names, complete := s.TraceNames("alpha")
		if !complete || !slices.Equal(names, []string{"GET /item/0", "GET /item/1", "GET /item/2", "GET /item/3", "GET /item/4"}) {
			t.Errorf("%s: names of alpha %v (complete %v)", when, names, complete)
		}
	}
	check("appended", s) // before any Sync
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro := open(t, dir, Options{ReadOnly: true})
	check("reopened", ro)
	ro.Close()
	if _, err := Rebuild(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	check("rebuilt", open(t, dir, Options{ReadOnly: true}))
}
