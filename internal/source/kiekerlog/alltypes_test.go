package kiekerlog_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/gen"
	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

// writeAll writes a log holding sample records of every type of the
// built-in catalogue (Kieker 2.0's, RegistryRecord included) and returns
// its directory and the records.
func writeAll(t *testing.T, binary bool) (string, []record.Record) {
	t.Helper()
	recs := gen.Samples(record.Builtin().Types())
	w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), Binary: binary, Metadata: false})
	if err != nil {
		t.Fatal(err)
	}
	var b record.Batch
	for i := range recs {
		b.AddRecord(&recs[i])
	}
	if err := w.Consume(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Dir(), recs
}

func readAll(t *testing.T, dir string, o kiekerlog.Options) ([]record.Record, kiekerlog.Stats, error) {
	t.Helper()
	r, err := kiekerlog.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	var got []record.Record
	err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			got = append(got, b.Records[i].Clone())
		}
		return nil
	}))
	return got, r.Stats(), err
}

// TestEveryKieker20Type: a log with every record type of Kieker 2.0's
// catalogue, RegistryRecord included, reads back completely.
func TestEveryKieker20Type(t *testing.T) {
	seen := false
	for _, typ := range record.Builtin().Types() {
		seen = seen || typ.Name == record.RegistryRecord
	}
	if !seen {
		t.Fatal("RegistryRecord is not in the catalogue")
	}
	for _, binary := range []bool{true, false} {
		dir, want := writeAll(t, binary)
		got, st, err := readAll(t, dir, kiekerlog.Options{})
		if err != nil {
			t.Fatalf("binary %v: %v", binary, err)
		}
		if len(got) != len(want) || len(st.Unknown) != 0 {
			t.Fatalf("binary %v: read %d records of %d (%v)", binary, len(got), len(want), st.Unknown)
		}
		for i := range want {
			if want[i].Type.Name != got[i].Type.Name {
				t.Fatalf("binary %v: record %d is a %s, want %s", binary, i, got[i].Type.Name, want[i].Type.Name)
			}
		}
	}
}

// TestUnknownTypesAreSkipped: records of a type the catalogue does not
// know are reported per type and the rest of the log is read (an ASCII
// log line by line; in a binary file the rest of the file is lost, since
// its records carry no length); --strict stops at the first.
func TestUnknownTypesAreSkipped(t *testing.T) {
	missing := map[string]bool{record.RegistryRecord: true, record.CPUUtilizationRecord: true}
	partial := record.NewCatalog()
	for _, typ := range record.Builtin().Types() {
		if !missing[typ.Name] {
			if err := partial.Add(typ); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir, all := writeAll(t, false)
	want := 0
	for _, r := range all {
		if !missing[r.Type.Name] {
			want++
		}
	}
	got, st, err := readAll(t, dir, kiekerlog.Options{Catalog: partial})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want || st.Unknown[record.RegistryRecord] != gen.SamplesPerType || st.Unknown[record.CPUUtilizationRecord] != gen.SamplesPerType {
		t.Fatalf("ascii: read %d of %d, unknown %v", len(got), want, st.Unknown)
	}

	_, _, err = readAll(t, dir, kiekerlog.Options{Catalog: partial, Strict: true})
	if !errors.Is(err, kieker.ErrUnknownType) {
		t.Fatalf("strict: %v", err)
	}

	bdir, _ := writeAll(t, true)
	got, st, err = readAll(t, bdir, kiekerlog.Options{Catalog: partial})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unknown) != 1 || len(st.UnknownTails) != 1 || len(got) == 0 {
		t.Fatalf("binary: read %d, unknown %v, tails %v", len(got), st.Unknown, st.UnknownTails)
	}
}

// TestLastLineWithoutLineEnd: in an ASCII log whose last line has no line
// end (as Kieker's writer leaves its logs), that line is a record when it
// parses completely, for every record type and sample value, as Kieker's
// reader reads it; nothing is reported as a cut end.
func TestLastLineWithoutLineEnd(t *testing.T) {
	for i, sample := range gen.Samples(record.Builtin().Types()) {
		w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), Metadata: false})
		if err != nil {
			t.Fatal(err)
		}
		var b record.Batch
		b.AddRecord(&sample)
		b.AddRecord(&sample)
		if err := w.Consume(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		logs, err := logdir.Discover(w.Dir())
		if err != nil {
			t.Fatal(err)
		}
		files := logs[0].DataFiles()
		path := files[len(files)-1].Path
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := readAll(t, w.Dir(), kiekerlog.Options{}) // ASCII does not keep every string
		if err != nil || len(want) != 2 {
			t.Fatalf("sample %d: %d records, %v", i, len(want), err)
		}
		if !bytes.HasSuffix(data, []byte("\n")) {
			t.Fatalf("sample %d (%s): the writer's line has no line end", i, sample.Type.Name)
		}
		if err := os.WriteFile(path, bytes.TrimSuffix(data, []byte("\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		var cuts []error
		got, st, err := readAll(t, w.Dir(), kiekerlog.Options{OnCutEnd: func(err error) { cuts = append(cuts, err) }})
		if err != nil || len(cuts) != 0 || st.CutEnds != 0 {
			t.Fatalf("sample %d (%s): %v, cut ends %v", i, sample.Type.Name, err, cuts)
		}
		if len(got) != 2 || !got[0].Equal(&want[0]) || !got[1].Equal(&want[1]) {
			t.Fatalf("sample %d (%s): read %d records %v, want %v", i, sample.Type.Name, len(got), got, want)
		}
	}
}
