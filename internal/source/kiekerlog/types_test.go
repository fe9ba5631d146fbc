package kiekerlog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

// A log directory written by hand: a type Kieker lacks, described by an
// IRL file beside kieker.map.
const ownLogMap = "$0=kieker.common.record.misc.KiekerMetadataRecord\n$1=app.Order$Line\n"
const ownLogDat = "$0;-1;2.0.3;KIEKER;h;0;false;0;NANOSECONDS;0\n$1;5;3;x\n$1;6;4;y\n"
const ownLogIRL = "package app\nentity `Order$Line` {\n\tint `line.no`\n\tstring item\n}\n"

func ownLog(t *testing.T, irl string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "kieker-20250101-000000-1-UTC-h-KIEKER")
	os.MkdirAll(dir, 0o755)
	for name, content := range map[string]string{"kieker.map": ownLogMap, "kieker-20250101-000000000-UTC-001.dat": ownLogDat, "types.irl": irl} {
		if content == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readTypes(t *testing.T, dir string, o kiekerlog.Options) ([]string, kiekerlog.Stats, error) {
	t.Helper()
	recs, st, err := readAll(t, dir, o)
	got := make([]string, 0, len(recs))
	for _, rec := range recs {
		got = append(got, rec.Type.String())
	}
	return got, st, err
}

func TestLogTypesFromIRLBesideMap(t *testing.T) {
	got, _, err := readTypes(t, ownLog(t, ownLogIRL), kiekerlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1] != "app.Order$Line { int line.no; string item }" {
		t.Fatalf("%q", got)
	}
	// The log's description wins over a conflicting one of the caller's.
	cat := record.Builtin()
	cat.Add(record.MustType("app.Order$Line", record.Field{Name: "x", Kind: record.Long}))
	if got, _, err = readTypes(t, ownLog(t, ownLogIRL), kiekerlog.Options{Catalog: cat}); err != nil || len(got) != 3 {
		t.Fatalf("%q %v", got, err)
	}
	// Without the IRL file the records are unknown.
	_, st, err := readTypes(t, ownLog(t, ""), kiekerlog.Options{})
	if err != nil || st.Unknown["app.Order$Line"] != 2 {
		t.Fatalf("%+v %v", st, err)
	}
}

func TestBrokenIRLBesideMap(t *testing.T) {
	dir := ownLog(t, "package app\nentity {")
	_, _, err := readTypes(t, dir, kiekerlog.Options{})
	if err == nil || !strings.Contains(err.Error(), "record types") || !strings.Contains(err.Error(), "types.irl:2:8") {
		t.Fatalf("error %v", err)
	}
	var skipped []error
	got, st, err := readTypes(t, dir, kiekerlog.Options{SkipBad: true, OnSkip: func(err error) { skipped = append(skipped, err) }})
	if err != nil || len(skipped) != 1 || len(got) != 1 || st.Unknown["app.Order$Line"] != 2 {
		t.Fatalf("got %q, skipped %v, %+v, %v", got, skipped, st, err)
	}
}
