package gen_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tracebridge/tracebridge/internal/gen"
	"github.com/tracebridge/tracebridge/internal/gen/gentest"
	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// proofTypes returns Kieker's 67 built-in types (described by Kieker's own
// IRL, so that their constants, defaults and aliases are generated too),
// OPAD's record types, and the types of testdata/allkinds.irl (every kind,
// arrays of every kind, names that are keywords somewhere).
func proofTypes(t *testing.T) ([]gen.Type, []*record.Type, *record.Catalog) {
	t.Helper()
	m, err := irl.Load(
		testcorpus.Path(t, "kieker-irl", "common"),
		testcorpus.Path(t, "kieker-irl", "tools", "opad"),
		filepath.Join("testdata", "allkinds.irl"))
	if err != nil {
		t.Fatal(err)
	}
	cat := record.Builtin()
	if _, err := m.AddTo(cat); err != nil {
		t.Fatal(err)
	}
	var types []gen.Type
	add := func(rt *record.Type) {
		gt := gen.Type{Record: rt}
		if d := m.Decl(rt.Name); d != nil {
			gt.Decl, gt.Model = d, m
		}
		types = append(types, gt)
	}
	builtin := record.Builtin().Types()
	if len(builtin) != 68 {
		t.Fatalf("%d built-in types, want 68", len(builtin))
	}
	for _, rt := range builtin {
		add(rt)
	}
	for _, d := range m.Decls() {
		if d.IsRecord() && record.Builtin().Lookup(d.FullName()) == nil {
			add(cat.Lookup(d.FullName()))
		}
	}
	if len(types) != 68+5+3 {
		t.Fatalf("%d types, want 68 built-in, 5 of OPAD and 3 of allkinds.irl", len(types))
	}
	rts := make([]*record.Type, len(types))
	for i, gt := range types {
		rts[i] = gt.Record
	}
	return types, rts, cat
}

// TestRoundTrip is the proof of the generated code: for every language it
// generates the code for all built-in types, OPAD's and allkinds.irl's,
// compiles it with the language's toolchain, runs the generated round-trip
// program (which checks its bytes against internal/codec's), and decodes
// the program's output with internal/codec/kdb and internal/codec/kieker.
func TestRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs generated code")
	}
	types, rts, cat := proofTypes(t)
	for _, lang := range gen.Langs() {
		t.Run(lang.String(), func(t *testing.T) {
			dir := t.TempDir()
			files, err := gen.Generate(types, gen.Options{Lang: lang, Tests: true})
			if err != nil {
				t.Fatal(err)
			}
			write(t, dir, files)
			gentest.Run(t, lang, "", dir, cat, rts)
		})
	}
}

func write(t *testing.T, dir string, files []gen.File) {
	t.Helper()
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
