package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// The record counts each shared log's PROVENANCE.txt gives.
var provenance = map[string]map[string]int{
	"kieker-1.10-ascii-event-trace": {
		"KiekerMetadataRecord": 1, "TraceMetadata": 1, "BeforeOperationEvent": 52, "AfterOperationEvent": 52,
	},
	"kieker-1.10-binary-event-trace": {
		"KiekerMetadataRecord": 1, "TraceMetadata": 100, "BeforeOperationEvent": 396, "AfterOperationEvent": 389, "AfterOperationFailedEvent": 7,
	},
	"kieker-1.13-binary-callobject": {
		"KiekerMetadataRecord": 1, "TraceMetadata": 4, "CallOperationObjectEvent": 7,
	},
	"kieker-1.14-ascii-system-metrics": {
		"KiekerMetadataRecord": 1, "CPUUtilizationRecord": 1, "MemSwapUsageRecord": 1, "DiskUsageRecord": 1, "NetworkUtilizationRecord": 1, "LoadAverageRecord": 1,
	},
	"kieker-1.15-ascii-applicationtracemetadata-teastore": {
		"KiekerMetadataRecord": 1, "ApplicationTraceMetadata": 2, "BeforeOperationEvent": 13, "AfterOperationEvent": 8, "AfterOperationFailedEvent": 5,
	},
	"kieker-1.8-ascii-operationexecution": {
		"KiekerMetadataRecord": 1, "OperationExecutionRecord": 10,
	},
	"kieker-2.0-ascii-event-trace":  kieker20Counts,
	"kieker-2.0-binary-event-trace": kieker20Counts,
}

var kieker20Counts = map[string]int{
	"KiekerMetadataRecord": 1, "ApplicationTraceMetadata": 31, "BeforeOperationEvent": 186, "AfterOperationEvent": 180, "AfterOperationFailedEvent": 6,
}

var compressedVariants = []string{
	"bzip2-ascii", "bzip2-binary", "deflate-ascii", "deflate-binary", "gzip-ascii", "gzip-binary",
	"gzip-binary-rotated", "xz-ascii", "xz-binary", "zip-ascii", "zip-ascii-rotated", "zip-binary",
}

// allLogs returns every shared log with its expected counts.
func allLogs(t *testing.T) map[string]map[string]int {
	logs := map[string]map[string]int{}
	for name, counts := range provenance {
		logs[testcorpus.Path(t, "kieker-logs", name)] = counts
	}
	for _, v := range compressedVariants {
		logs[testcorpus.Path(t, "kieker-logs", "kieker-2.0-compressed", v)] = kieker20Counts
	}
	return logs
}

type jsonRecord struct {
	Type             string                     `json:"type"`
	LoggingTimestamp int64                      `json:"loggingTimestamp"`
	Fields           map[string]json.RawMessage `json:"fields"`
}

func countTypes(t *testing.T, jsonLines string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(jsonLines))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("invalid JSON line %q: %v", sc.Text(), err)
		}
		counts[r.Type[strings.LastIndexByte(r.Type, '.')+1:]]++
	}
	return counts
}

func TestCatReadsEverySharedLog(t *testing.T) {
	for dir, want := range allLogs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			r := ok(t, "cat", "--json", dir)
			if d := cmp.Diff(want, countTypes(t, r.stdout)); d != "" {
				t.Errorf("record counts (-PROVENANCE +read):\n%s", d)
			}
			text := ok(t, "cat", dir)
			if n, m := strings.Count(text.stdout, "\n"), strings.Count(r.stdout, "\n"); n != m {
				t.Errorf("text output has %d lines, JSON %d", n, m)
			}
		})
	}
}

func TestCatJSONShape(t *testing.T) {
	r := ok(t, "cat", "--json", testcorpus.Path(t, "kieker-logs", "kieker-2.0-ascii-event-trace"))
	lines := strings.SplitN(r.stdout, "\n", 3)
	wantMeta := `{"type":"kieker.common.record.misc.KiekerMetadataRecord","loggingTimestamp":-1,"fields":{"version":"2.0.4-SNAPSHOT","controllerName":"KIEKER","hostname":"realclients-host","experimentId":1,"debugMode":false,"timeOffset":0,"timeUnit":"NANOSECONDS","numberOfRecords":0}}`
	if lines[0] != wantMeta {
		t.Errorf("first line\n got %s\nwant %s", lines[0], wantMeta)
	}
	// Longs are exact JSON numbers, fields in catalogue order.
	wantTrace := `{"type":"kieker.common.record.flow.trace.ApplicationTraceMetadata","loggingTimestamp":-1,"fields":{"traceId":-1439696346406715392,"threadId":1,"sessionId":"<no-session-id>","hostname":"realclients-host","parentTraceId":-1439696346406715392,"parentOrderId":-1,"applicationName":"realclients-app"}}`
	if lines[1] != wantTrace {
		t.Errorf("second line\n got %s\nwant %s", lines[1], wantTrace)
	}
}

// TestConvertRoundTrip converts every shared log ascii → binary → ascii
// (through a compression) and checks that `cat --json` prints the same.
func TestConvertRoundTrip(t *testing.T) {
	compressions := []string{"none", "gzip", "deflate", "zip", "xz"}
	i := 0
	for dir := range allLogs(t) {
		comp := compressions[i%len(compressions)]
		i++
		t.Run(filepath.Base(dir)+"/"+comp, func(t *testing.T) {
			t.Parallel()
			orig := ok(t, "cat", "--json", dir).stdout
			tmp := t.TempDir()
			bin := strings.TrimSpace(ok(t, "convert", "--to", "binary", "--compress", comp, "--max-entries", "100", dir, filepath.Join(tmp, "bin")).stdout)
			asc := strings.TrimSpace(ok(t, "convert", "--to", "ascii", bin, filepath.Join(tmp, "ascii")).stdout)
			for _, out := range []string{bin, asc} {
				if got := ok(t, "cat", "--json", out).stdout; got != orig {
					t.Fatalf("%s: cat --json differs from the original:\n%s", out, cmp.Diff(orig, got))
				}
			}
			checkKiekerNames(t, bin, ".bin"+map[string]string{"none": "", "gzip": ".gz", "deflate": ".df", "zip": ".zip", "xz": ".xz"}[comp])
			checkKiekerNames(t, asc, ".dat")
		})
	}
}

// checkKiekerNames checks that dir is named as Kieker ≥1.13 names log
// directories and holds kieker.map plus data files named as Kieker names them.
func checkKiekerNames(t *testing.T, dir, ext string) {
	t.Helper()
	if !dirName.MatchString(filepath.Base(dir)) {
		t.Errorf("log directory %q is not named kieker-<yyyyMMdd-HHmmss>-<nanoTime>-UTC-<host>-<controller>", filepath.Base(dir))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var data []string
	for _, e := range entries {
		if e.Name() == "kieker.map" {
			continue
		}
		data = append(data, e.Name())
		if !fileName.MatchString(e.Name()) || !strings.HasSuffix(e.Name(), ext) {
			t.Errorf("data file %q is not named kieker-<yyyyMMdd-HHmmssSSS>-UTC-<nnn>%s", e.Name(), ext)
		}
	}
	if len(data) == 0 {
		t.Error("no data files")
	}
	if !slices.IsSorted(data) {
		t.Errorf("data files out of order: %v", data)
	}
}

// TestRewriteReproducesKiekerASCII re-writes Kieker ≥1.13 ASCII logs and
// compares the .dat lines byte for byte.
func TestRewriteReproducesKiekerASCII(t *testing.T) {
	for _, name := range []string{"kieker-1.14-ascii-system-metrics", "kieker-1.15-ascii-applicationtracemetadata-teastore", "kieker-2.0-ascii-event-trace"} {
		t.Run(name, func(t *testing.T) {
			in := testcorpus.Path(t, "kieker-logs", name)
			out := strings.TrimSpace(ok(t, "convert", "--to", "ascii", in, t.TempDir()).stdout)
			if got, want := datLines(t, out), datLines(t, in); !slices.Equal(got, want) {
				t.Fatalf(".dat lines differ:\n%s", cmp.Diff(want, got))
			}
		})
	}
}

func datLines(t *testing.T, dir string) []string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".dat") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines = append(lines, strings.SplitAfter(string(b), "\n")...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines
}
