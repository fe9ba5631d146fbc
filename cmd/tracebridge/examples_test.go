package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/mapping"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// TestExampleMappingCoversTheSharedLogs: examples/mapping.txt, which the
// README's KDB command line (serve -t tcp-server -m) uses, has an id for
// every record type of every shared example log, so that `replay --to
// kdb-tcp://… --mapping examples/mapping.txt` sends all of their records;
// and it gives the default mapping's types the default's ids, so that
// replay without --mapping reaches such a bridge too (it failed with
// "unknown type id 13", KiekerMetadataRecord).
func TestExampleMappingCoversTheSharedLogs(t *testing.T) {
	cat, err := loadCatalog([]string{filepath.Join("..", "..", "examples", "records")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := mapping.Load(filepath.Join("..", "..", "examples", "mapping.txt"), cat)
	if err != nil {
		t.Fatal(err)
	}
	def, err := kdb.DefaultMapping(cat)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range def.IDs() {
		if got, want := m.Type(id), def.Type(id); got != want {
			t.Errorf("id %d: %v in examples/mapping.txt, %s in the default mapping", id, got, want.Name)
		}
	}
	names := testcorpus.LogNames(t)
	if len(names) < 9 {
		t.Fatalf("only %d shared logs: %v", len(names), names)
	}
	for _, name := range names {
		r, err := kiekerlog.Open(testcorpus.Path(t, "kieker-logs", name), kiekerlog.Options{Catalog: cat, SkipBad: true, OnSkip: func(error) {}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var types []string
		err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
			for i := range b.Records {
				if n := b.Records[i].Type.Name; !slices.Contains(types, n) {
					types = append(types, n)
				}
			}
			return nil
		}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(types) == 0 {
			t.Errorf("%s: no records read", name)
		}
		for _, typ := range types {
			if _, ok := m.ID(cat.Lookup(typ)); !ok {
				t.Errorf("%s: record type %s has no id in examples/mapping.txt", name, typ)
			}
		}
		t.Logf("%s: %v", name, types)
	}
}

// TestKDBExampleCommandLine: the README's KDB command line (serve -t
// tcp-server -m examples/mapping.txt -L examples/records) takes what the
// README's `replay --to kdb-tcp://…` sends without --mapping (it failed
// with "unknown type id 13"), and, with --mapping examples/mapping.txt,
// every record of every shared log (32 could not be sent: no id for
// ApplicationTraceMetadata).
func TestKDBExampleCommandLine(t *testing.T) {
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	mappingFile := filepath.Join(examples, "mapping.txt")
	p := bridgetest.Start(t, t.TempDir(), "-t", "tcp-server", "-p", "0", "-m", mappingFile, "-L", filepath.Join(examples, "records"), "--data-dir", "logs")
	to := "kdb-tcp://" + p.Addr("tcp-server")
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	if r := ok(t, "replay", log, "--to", to, "--rate", "1000"); !strings.Contains(r.stdout, "replayed 404 records") || r.stderr != "" {
		t.Errorf("replay with the default mapping: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	for _, name := range testcorpus.LogNames(t) {
		r := ok(t, "replay", testcorpus.Path(t, "kieker-logs", name), "--to", to, "--mapping", mappingFile, "--skip-bad")
		if !strings.Contains(r.stdout, "replayed") || strings.Contains(r.stderr, "could not be sent") {
			t.Errorf("replay %s with examples/mapping.txt: stdout %q, stderr %q", name, r.stdout, r.stderr)
		}
	}
	p.Stop()
	if strings.Contains(p.Stderr(), "unknown type id") || strings.Contains(p.Stderr(), "malformed") {
		t.Errorf("the bridge rejected records:\n%s", p.Stderr())
	}
}
