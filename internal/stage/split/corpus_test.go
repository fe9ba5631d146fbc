package split

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// corpusLogs returns every log of the shared corpus: the Kieker logs and
// each compressed variant.
func corpusLogs(t testing.TB) []string {
	root := testcorpus.Path(t, "kieker-logs")
	var logs []string
	for _, name := range testcorpus.LogNames(t) {
		if name != "kieker-2.0-compressed" {
			logs = append(logs, filepath.Join(root, name))
			continue
		}
		variants, err := os.ReadDir(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range variants {
			if v.IsDir() {
				logs = append(logs, filepath.Join(root, name, v.Name()))
			}
		}
	}
	if len(logs) < 20 {
		t.Fatalf("found %d logs in %s, want the 8 logs and 12 compressed variants", len(logs), root)
	}
	return logs
}

func readLog(t testing.TB, path string) []record.Record {
	t.Helper()
	r, err := kiekerlog.Open(path, kiekerlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	if err := r.Run(context.Background(), col); err != nil {
		t.Fatal(err)
	}
	return col.recs
}

// corpusSpecs cut the corpus's traces in different places (the 1.10
// bookstore calls Catalog and CRM from Bookstore, TeaStore calls its
// registry client from the recommender, the 1.13 log has a.A_ and c.C).
var corpusSpecs = []string{
	"package:1", "package:3", "package:4", "package:5",
	`regex:.*\.Catalog .*\.CRM`,
	`regex:.*\.Bookstore`,
	`regex:tools\.descartes\.teastore\.registryclient\..*;package:2`,
	`regex:.*RESTClient.* .*Synchronizer`,
	`regex:.*\.Main`,
}

// TestCorpusSplitMerge splits every real log with several boundaries and
// merges it back: the records are the original ones, in order.
func TestCorpusSplitMerge(t *testing.T) {
	cut := map[string]int64{}
	for _, path := range corpusLogs(t) {
		name, _ := filepath.Rel(testcorpus.Path(t, "kieker-logs"), path)
		in := readLog(t, path)
		for _, spec := range corpusSpecs {
			t.Run(name+"/"+spec, func(t *testing.T) {
				b := mustParse(t, spec)
				sp := splitRecs(t, b, in, []int{100}, Options{})
				if len(sp.malformed) > 0 {
					t.Errorf("reported %v", sp.malformed)
				}
				checkSplit(t, name, b, in, sp.out)
				mg := mergeRecs(t, sp.out, []int{7}, Options{})
				if d := diffRecords(in, mg.out); d != "" {
					t.Fatalf("merge(split(log)) differs (-want +got):\n%s", d)
				}
				if sp.stats.TracesOut-sp.stats.TracesIn != sp.stats.Partial || mg.stats.Partial != sp.stats.Partial {
					t.Fatalf("split %+v merge %+v", sp.stats, mg.stats)
				}
				cut[filepath.Base(name)] += sp.stats.Partial
			})
		}
	}
	// The 2.0 logs call one class only; with each method taken for a class
	// of its own their real trace shapes are cut too.
	for _, path := range corpusLogs(t) {
		name, _ := filepath.Rel(testcorpus.Path(t, "kieker-logs"), path)
		in := methodsAsClasses(readLog(t, path))
		b := mustParse(t, `regex:.*\.catalogLookup .*\.getBook;package:1`)
		sp := splitRecs(t, b, in, []int{33}, Options{})
		if len(sp.malformed) > 0 {
			t.Errorf("%s: reported %v", name, sp.malformed)
		}
		checkSplit(t, name, b, in, sp.out)
		mg := mergeRecs(t, sp.out, nil, Options{})
		if d := diffRecords(in, mg.out); d != "" {
			t.Fatalf("%s, methods as classes: merge(split(log)) differs (-want +got):\n%s", name, d)
		}
		cut[filepath.Base(name)+" (methods)"] += sp.stats.Partial
	}
	// The boundaries do cut the logs whose classes differ.
	for _, name := range []string{"kieker-1.10-binary-event-trace", "kieker-1.15-ascii-applicationtracemetadata-teastore", "kieker-2.0-binary-event-trace (methods)", "xz-ascii (methods)"} {
		if cut[name] == 0 {
			t.Errorf("%s: never split", name)
		}
	}
	t.Logf("partial traces cut per log: %v", cut)
}

// The merger passes every real log through unchanged.
func TestCorpusMergeUnsplit(t *testing.T) {
	for _, path := range corpusLogs(t) {
		in := readLog(t, path)
		mg := mergeRecs(t, in, nil, Options{})
		if d := diffRecords(in, mg.out); d != "" {
			t.Fatalf("%s: merge changed an unsplit log (-want +got):\n%s", path, d)
		}
	}
}

// methodsAsClasses replaces each event's classSignature by its qualified
// method name (a.b.C.m), so that every method is a class of its own.
func methodsAsClasses(recs []record.Record) []record.Record {
	var tc trace.TypeCache
	out := make([]record.Record, len(recs))
	for i, r := range recs {
		out[i] = r.Clone()
		ti := tc.Get(r.Type)
		if (ti.Role == trace.RoleBefore || ti.Role == trace.RoleAfter) && ti.Op >= 0 {
			o := r.Values[ti.Op].Str()
			if k := strings.IndexByte(o, '('); k >= 0 {
				o = o[:k]
			}
			out[i].Values[ti.Class] = record.StringValue(o[strings.LastIndexByte(o, ' ')+1:])
		}
	}
	return out
}
