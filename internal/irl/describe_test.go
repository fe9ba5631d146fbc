package irl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/record"
)

// TestDescribeRoundTrip writes record types with names IRL's identifiers
// cannot hold (flattened JFR fields with dots, a nested class with $, a
// keyword, non-ASCII, arrays of every kind) and loads them back: same
// names, same fields.
func TestDescribeRoundTrip(t *testing.T) {
	var fields []record.Field
	for k := record.Bool; k <= record.String; k++ {
		fields = append(fields, record.Field{Name: "f" + k.String(), Kind: k}, record.Field{Name: "a." + k.String(), Kind: k, Array: true})
	}
	types := []*record.Type{
		record.MustType("jdk.ExecutionSample",
			record.Field{Name: "startTime", Kind: record.Long},
			record.Field{Name: "sampledThread", Kind: record.String},
			record.Field{Name: "sampledThread.javaThreadId", Kind: record.Long},
			record.Field{Name: "stackTrace", Kind: record.String, Array: true},
			record.Field{Name: "stackTrace.truncated", Kind: record.Bool},
			record.Field{Name: "state", Kind: record.String}),
		record.MustType("jdk.Outer$Inner", record.Field{Name: "long", Kind: record.Long}, record.Field{Name: "größe-x", Kind: record.Int}),
		record.MustType("jdk.AllKinds", fields...),
	}
	src, err := Describe("jdk", types, "written by a test\nsecond line")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"// written by a test\n// second line\npackage jdk\n", "\tlong `sampledThread.javaThreadId`\n", "entity `Outer$Inner` {\n\tlong ^long\n\tint `größe-x`\n", "\tstring[] `a.string`\n"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("IRL lacks %q:\n%s", want, src)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.irl"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cat := record.NewCatalog()
	if n, err := LoadInto(cat, dir); err != nil || n != len(types) {
		t.Fatalf("LoadInto: %d, %v\n%s", n, err, src)
	}
	for _, want := range types {
		got := cat.Lookup(want.Name)
		if got == nil {
			t.Fatalf("%s not loaded", want.Name)
		}
		if diff := cmp.Diff(want.Fields, got.Fields); diff != "" {
			t.Errorf("%s fields (-want +got):\n%s", want.Name, diff)
		}
	}
	// Format of the parsed file parses to the same tree.
	f, err := Parse("t.irl", src)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse("t.irl", Format(f))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, g, ignorePos); diff != "" {
		t.Errorf("round trip (-first +second):\n%s", diff)
	}
}

func TestDescribeRefuses(t *testing.T) {
	for _, tt := range []struct {
		typ  *record.Type
		want string
	}{
		{record.MustType("NoPackage", record.Field{Name: "x", Kind: record.Int}), "without a package"},
		{record.MustType("a..b", record.Field{Name: "x", Kind: record.Int}), `name part ""`},
		{record.MustType("a.b", record.Field{Name: "x`y", Kind: record.Int}), "field name"},
		{record.MustType("a.b", record.Field{Name: "x\ny", Kind: record.Int}), "field name"},
	} {
		pkg, _ := SplitName(tt.typ.Name)
		if _, err := Describe(pkg, []*record.Type{tt.typ}, ""); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.typ.Name, err, tt.want)
		}
	}
	if _, err := Describe("b", []*record.Type{record.MustType("a.X", record.Field{Name: "x", Kind: record.Int})}, ""); err == nil {
		t.Error("a type of another package was written")
	}
}
