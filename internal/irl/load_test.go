package irl

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

func loadCorpus(tb testing.TB, elem ...string) *Model {
	tb.Helper()
	m, err := Load(testcorpus.Path(tb, append([]string{"kieker-irl"}, elem...)...))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func typeMap(tb testing.TB, m *Model) map[string]*record.Type {
	tb.Helper()
	types, err := m.Types()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]*record.Type{}
	for _, t := range types {
		out[t.Name] = t
	}
	return out
}

func TestLoadCorpus(t *testing.T) {
	tests := []struct {
		dir       []string
		types     int
		prefix    string
		templates int
	}{
		{dir: nil, types: 72},
		{dir: []string{"common"}, types: 67, prefix: record.Prefix},
		{dir: []string{"tools", "opad"}, types: 5, prefix: "kieker.tools.opad.record."},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"kieker-irl"}, tt.dir...), "/"), func(t *testing.T) {
			m := loadCorpus(t, tt.dir...)
			types, err := m.Types()
			if err != nil {
				t.Fatal(err)
			}
			if len(types) != tt.types {
				t.Errorf("%d types, want %d", len(types), tt.types)
			}
			for _, ty := range types {
				if !strings.HasPrefix(ty.Name, tt.prefix) {
					t.Errorf("type %s outside %s", ty.Name, tt.prefix)
				}
			}
		})
	}
}

// dependencies returns the corpus files that files need: the files of
// every imported package and of their own packages, transitively.
func dependencies(tb testing.TB, all map[string]*File, files []string) []string {
	tb.Helper()
	byPkg := map[string][]string{}
	for name, f := range all {
		byPkg[f.Package] = append(byPkg[f.Package], name)
	}
	need := map[string]bool{}
	var add func(name string)
	add = func(name string) {
		if need[name] {
			return
		}
		need[name] = true
		f := all[name]
		for _, n := range byPkg[f.Package] {
			add(n)
		}
		for _, imp := range f.Imports {
			pkg := imp.Path
			if !imp.Wildcard {
				pkg = pkg[:strings.LastIndexByte(pkg, '.')]
			}
			for _, n := range byPkg[pkg] {
				add(n)
			}
		}
	}
	for _, n := range files {
		add(n)
	}
	var out []string
	for n := range need {
		if !slices.Contains(files, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// TestLoadPartsWithDependencies loads each corpus file, and each directory
// holding IRL files, together with only the files it depends on; the
// record types it defines must be those of the whole corpus.
func TestLoadPartsWithDependencies(t *testing.T) {
	full := typeMap(t, loadCorpus(t))
	all := map[string]*File{}
	for _, name := range corpusFiles(t) {
		all[name] = parseFile(t, name)
	}
	check := func(t *testing.T, own []string, paths []string) {
		m, err := Load(paths...)
		if err != nil {
			t.Fatal(err)
		}
		got := typeMap(t, m)
		n := 0
		for _, name := range own {
			for _, d := range all[name].Decls {
				if !d.IsRecord() {
					continue
				}
				n++
				g := got[d.FullName()]
				if g == nil {
					t.Errorf("%s missing", d.FullName())
					continue
				}
				if diff := cmp.Diff(full[d.FullName()].String(), g.String()); diff != "" {
					t.Errorf("%s differs from the full load (-full +part):\n%s", d.FullName(), diff)
				}
			}
		}
		t.Logf("%d files, %d own record types", len(paths), n)
	}
	root := testcorpus.Path(t, "kieker-irl")
	dirs := map[string][]string{} // directory → the files Load finds under it
	for name := range all {
		for d := filepath.Dir(name); d != root; d = filepath.Dir(d) {
			dirs[d] = append(dirs[d], name)
		}
	}
	for name := range all {
		rel, _ := filepath.Rel(root, name)
		t.Run("file/"+rel, func(t *testing.T) {
			check(t, []string{name}, append([]string{name}, dependencies(t, all, []string{name})...))
		})
	}
	for dir, files := range dirs {
		rel, _ := filepath.Rel(root, dir)
		t.Run("dir/"+rel, func(t *testing.T) {
			check(t, files, append([]string{dir}, dependencies(t, all, files)...))
		})
	}
}

// TestBuiltinAgreement checks the built-in catalogue against Kieker's own
// record descriptions: every built-in type is defined in IRL with the same
// fields (names, kinds, arrays, order), and every IRL type of Kieker's
// common module is built in. RegistryRecord is the one built-in type Kieker
// writes by hand instead of describing it in IRL.
func TestBuiltinAgreement(t *testing.T) {
	irlTypes := typeMap(t, loadCorpus(t, "common"))
	builtin := record.Builtin().Types()
	if len(builtin) != 68 {
		t.Errorf("%d built-in types, want 68 (Kieker 2.0's 67 IRL types and RegistryRecord)", len(builtin))
	}
	for _, b := range builtin {
		if b.Name == record.RegistryRecord {
			continue // hand-written in Kieker, not described in IRL
		}
		it, ok := irlTypes[b.Name]
		if !ok {
			t.Errorf("built-in type %s is not defined in the IRL files", b.Name)
			continue
		}
		if diff := cmp.Diff(b.Fields, it.Fields); diff != "" {
			t.Errorf("%s: built-in and IRL fields differ (-builtin +irl):\n%s", b.Name, diff)
		}
	}
	cat := record.Builtin()
	for name := range irlTypes {
		if cat.Lookup(name) == nil {
			t.Errorf("IRL type %s is not built in", name)
		}
	}
}

func TestFieldOrder(t *testing.T) {
	m := loadCorpus(t, "common")
	tests := []struct {
		decl string
		want []string
	}{
		{"flow.trace.operation.object.CallOperationObjectEvent", []string{"timestamp", "traceId", "orderIndex", "operationSignature",
			"classSignature", "calleeOperationSignature", "calleeClassSignature", "objectId", "calleeObjectId"}},
		{"database.BeforeDatabaseEvent", []string{"timestamp", "classSignature", "traceId", "orderIndex", "parameters", "technology"}},
		{"flow.trace.TraceMetadata", []string{"traceId", "threadId", "sessionId", "hostname", "parentTraceId", "parentOrderId"}},
		{"flow.thread.AfterFailedThreadBasedEvent", []string{"timestamp", "threadId", "orderIndex", "operationSignature", "classSignature", "cause"}},
		{"flow.ICallObjectRecord", []string{"operationSignature", "classSignature", "calleeOperationSignature", "calleeClassSignature", "objectId", "calleeObjectId"}},
		{"flow.AbstractEvent", []string{"timestamp"}},
		{"misc.EmptyRecord", nil},
	}
	for _, tt := range tests {
		t.Run(tt.decl, func(t *testing.T) {
			d := m.Decl(record.Prefix + tt.decl)
			if d == nil {
				t.Fatalf("no declaration %s", tt.decl)
			}
			var got []string
			for _, f := range m.Fields(d) {
				got = append(got, f.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestModel checks the parts of the model the code generator relies on.
func TestModel(t *testing.T) {
	m := loadCorpus(t)
	decl := func(name string) *Decl {
		t.Helper()
		d := m.Decl(name)
		if d == nil {
			t.Fatalf("no declaration %s", name)
		}
		return d
	}
	field := func(d *Decl, name string) Field {
		t.Helper()
		for _, f := range m.Properties(d) {
			if f.Name == name {
				return f
			}
		}
		t.Fatalf("%s has no field %s", d.Name, name)
		return Field{}
	}

	t.Run("transient field", func(t *testing.T) {
		d := decl(record.TraceMetadata)
		f := field(d, "nextOrderId")
		if !f.Transient() || !f.Decl.Has(AutoIncrement) || f.Kind != record.Int {
			t.Errorf("nextOrderId: transient %v, auto-increment %v, kind %v", f.Transient(), f.Decl.Has(AutoIncrement), f.Kind)
		}
		if n, p := len(m.Fields(d)), len(m.Properties(d)); n != 6 || p != 7 {
			t.Errorf("%d fields and %d properties, want 6 and 7", n, p)
		}
		if !field(d, "traceId").Decl.Has(Changeable) {
			t.Error("traceId is not changeable")
		}
	})
	t.Run("grouped by", func(t *testing.T) {
		d := decl(record.Prefix + "flow.ITraceRecord")
		f := field(d, "traceId")
		if f.Kind != record.Long || f.Decl.GroupedBy == nil || f.Decl.GroupedBy.Decl.Name != "TraceMetadata" || f.Decl.Default.Int != -1 {
			t.Errorf("traceId: %+v", f)
		}
	})
	t.Run("defaults and constants", func(t *testing.T) {
		d := decl(record.ApplicationTraceMetadata)
		f := field(d, "sessionId")
		if f.Owner.Name != "TraceMetadata" || f.Const == nil || f.Const.Value.Str != "<no-session-id>" {
			t.Errorf("sessionId: owner %s, const %+v", f.Owner.Name, f.Const)
		}
		if c := m.Constant(d, "NO_HOSTNAME"); c == nil || c.Value.Str != "<default-host>" {
			t.Errorf("inherited constant NO_HOSTNAME: %+v", c)
		}
		if c := m.Constant(d, "NO_APPLICATION_NAME"); c == nil || c.Type.Kind != record.String {
			t.Errorf("own constant NO_APPLICATION_NAME: %+v", c)
		}
		v := field(decl(record.KiekerMetadataRecord), "version")
		if v.Const != nil || v.Decl.Default.Kind != LitIdent || v.Decl.Default.Str != "KIEKER_VERSION" {
			t.Errorf("version default: %+v, const %+v", v.Decl.Default, v.Const)
		}
		cpu := field(decl(record.CPUUtilizationRecord), "idle")
		if cpu.Decl.Default.Kind != LitFloat || cpu.Decl.Default.Text != "0.0" || !strings.HasPrefix(cpu.Decl.Doc, "Fraction of time during which the CPU was idle.") {
			t.Errorf("idle: default %+v, doc %q", cpu.Decl.Default, cpu.Decl.Doc)
		}
	})
	t.Run("aliases", func(t *testing.T) {
		d := decl(record.Prefix + "flow.ICallRecord")
		want := []*Alias{{Field: "operationSignature", Name: "callerOperationSignature"}, {Field: "classSignature", Name: "callerClassSignature"}}
		if diff := cmp.Diff(want, d.Aliases, ignorePos); diff != "" {
			t.Errorf("aliases (-want +got):\n%s", diff)
		}
		if field(decl(record.CallOperationEvent), "calleeClassSignature").Owner != d {
			t.Error("calleeClassSignature not owned by ICallRecord")
		}
	})
	t.Run("declarations", func(t *testing.T) {
		d := decl(record.Prefix + "flow.trace.operation.object.EntryLevelBeforeOperationObjectEvent")
		if d.Kind != Event || !d.IsRecord() {
			t.Errorf("kind %v, record %v", d.Kind, d.IsRecord())
		}
		if a, _ := d.Annotation("author"); a != "Reiner Jung" {
			t.Errorf("author %q", a)
		}
		if s, _ := d.Annotation("since"); s != "2.0.0" {
			t.Errorf("since %q", s)
		}
		if p := m.Parent(d); p == nil || p.FullName() != record.Prefix+"flow.trace.operation.object.BeforeOperationObjectEvent" {
			t.Errorf("parent %v", p)
		}
		if ts := m.Templates(d); len(ts) != 1 || ts[0].FullName() != record.Prefix+"flow.trace.operation.IPayloadCharacterization" {
			t.Errorf("templates %v", ts)
		}
		if f := m.File(d); f == nil || filepath.Base(f.Name) != "ObjectEvent.irl" {
			t.Errorf("file %v", f)
		}
		abs := decl(record.Prefix + "flow.trace.AbstractTraceEvent")
		if abs.IsRecord() || !abs.Abstract {
			t.Error("AbstractTraceEvent is a record")
		}
		tpl := decl(record.Prefix + "flow.IClassSignature")
		if tpl.Kind != Template || tpl.Doc != "Externalize property to circumvent inheritance problems when\ninheriting IOperationRecord and IObjectRecord" {
			t.Errorf("IClassSignature: kind %v, doc %q", tpl.Kind, tpl.Doc)
		}
	})
}

func TestNamedDoubleRecord(t *testing.T) {
	cat := record.Builtin()
	n, err := LoadInto(cat, testcorpus.Path(t, "kieker-irl"))
	if err != nil {
		t.Fatal(err)
	}
	if n != 72 {
		t.Errorf("LoadInto: %d types, want 72", n)
	}
	got := cat.Lookup("kieker.tools.opad.record.NamedDoubleRecord")
	if got == nil {
		t.Fatal("NamedDoubleRecord not in the catalogue")
	}
	want := []record.Field{{Name: "applicationName", Kind: record.String}, {Name: "timestamp", Kind: record.Long}, {Name: "responseTime", Kind: record.Double}}
	if diff := cmp.Diff(want, got.Fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if len(cat.Types()) != 73 {
		t.Errorf("catalogue holds %d types, want 73", len(cat.Types()))
	}
}

// writeFiles writes name → content into a temporary directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadInto(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // error with the directory stripped; empty for success
		n     int
	}{
		{
			name:  "new type",
			files: map[string]string{"a.irl": "package x\nentity R {\n\tlong a\n}"},
			n:     1,
		},
		{
			name:  "identical built-in",
			files: map[string]string{"a.irl": "package kieker.common.record.misc\nentity TimestampRecord {\n\tlong timestamp = 0\n}"},
			n:     1,
		},
		{
			name:  "conflicting built-in",
			files: map[string]string{"a.irl": "package kieker.common.record.misc\n\nentity TimestampRecord {\n\tint timestamp\n}"},
			want: "a.irl:3:8: record type kieker.common.record.misc.TimestampRecord: fields kieker.common.record.misc.TimestampRecord { int timestamp }" +
				" conflict with the known type kieker.common.record.misc.TimestampRecord { long timestamp }",
		},
		{
			name:  "legacy alias",
			files: map[string]string{"a.irl": "package kieker.common.record\nentity OperationExecutionRecord {\n\tint x\n}"},
			want:  "a.irl:2:8: record type kieker.common.record.OperationExecutionRecord: name is a legacy alias of kieker.common.record.controlflow.OperationExecutionRecord",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			cat := record.Builtin()
			before := len(cat.Types())
			n, err := LoadInto(cat, dir)
			if tt.want != "" {
				if err == nil {
					t.Fatal("LoadInto succeeded")
				}
				if got := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""); got != tt.want {
					t.Errorf("error\n got: %s\nwant: %s", got, tt.want)
				}
				if len(cat.Types()) != before {
					t.Errorf("catalogue changed after an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.n {
				t.Errorf("n = %d, want %d", n, tt.n)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string // error lines with the directory stripped
	}{
		{
			name:  "unknown parent",
			files: map[string]string{"a.irl": "package p\nentity A extends Missing"},
			want:  []string{"a.irl:2:18: entity A: unknown parent Missing"},
		},
		{
			name:  "unknown imported parent",
			files: map[string]string{"a.irl": "package p\nimport q.Missing\nentity A extends Missing"},
			want:  []string{"a.irl:3:18: entity A: unknown parent Missing (imported as q.Missing, which no loaded file defines)"},
		},
		{
			name:  "unknown template",
			files: map[string]string{"a.irl": "package p\nentity A : T, q.U\ntemplate T"},
			want:  []string{"a.irl:2:15: entity A: unknown template q.U"},
		},
		{
			name:  "parent is a template",
			files: map[string]string{"a.irl": "package p\nentity A extends T\ntemplate T"},
			want:  []string{"a.irl:2:18: entity A: parent T is a template; list templates after ':'"},
		},
		{
			name:  "template is an entity",
			files: map[string]string{"a.irl": "package p\nentity A : B\nentity B"},
			want:  []string{"a.irl:2:12: entity A: B is an entity, not a template"},
		},
		{
			name:  "template cycle",
			files: map[string]string{"a.irl": "package p\ntemplate A : B\ntemplate B : C\ntemplate C : A"},
			want:  []string{"a.irl:4:14: template C: template cycle A -> B -> C -> A"},
		},
		{
			name:  "inheritance cycle",
			files: map[string]string{"a.irl": "package p\nentity A extends A"},
			want:  []string{"a.irl:2:18: entity A: inheritance cycle A -> A"},
		},
		{
			name: "field reference to a missing field",
			files: map[string]string{"a.irl": "package p\nimport q.Meta\ntemplate T {\n\tgrouped by Meta.traceID traceId = -1\n}",
				"b.irl": "package q\nentity Meta {\n\tlong traceId\n}"},
			want: []string{"a.irl:4:13: field traceId: Meta has no field traceID"},
		},
		{
			name:  "field reference to an unknown type",
			files: map[string]string{"a.irl": "package p\ntemplate T {\n\tgrouped by Meta.id id\n}"},
			want:  []string{"a.irl:3:13: field id: unknown type Meta in 'grouped by'"},
		},
		{
			name:  "field reference cycle",
			files: map[string]string{"a.irl": "package p\nentity A {\n\tgrouped by B.y x\n}\nentity B {\n\tgrouped by A.x y\n}"},
			want:  []string{"a.irl:3:13: field x: cycle of field references", "a.irl:6:13: field y: cycle of field references"},
		},
		{
			name:  "explicit type differs from the referenced field",
			files: map[string]string{"a.irl": "package p\nentity A {\n\tlong id\n\tgrouped by A.id int other\n}"},
			want:  []string{"a.irl:4:18: field other: type int differs from the type of A.id"},
		},
		{
			name: "duplicate type with different content",
			files: map[string]string{"a.irl": "package p\nentity A {\n\tlong x\n}",
				"b.irl": "package p\n\nentity A {\n\tint x\n}"},
			want: []string{"b.irl:3:8: entity p.A is also defined at " + "a.irl:2:8 with different content"},
		},
		{
			name:  "duplicate type in one file",
			files: map[string]string{"a.irl": "package p\nentity A\ntemplate A"},
			want:  []string{"a.irl:3:10: template A is declared twice (first at a.irl:2:8)"},
		},
		{
			name:  "duplicate field",
			files: map[string]string{"a.irl": "package p\nentity A {\n\tlong x\n\tlong x\n}"},
			want:  []string{"a.irl:4:7: entity A: duplicate field x (first at a.irl:3:7)"},
		},
		{
			name:  "conflicting inherited types",
			files: map[string]string{"a.irl": "package p\ntemplate T {\n\tlong x\n}\ntemplate U {\n\tint x\n}\nentity A : T, U"},
			want:  []string{"a.irl:8:8: entity A: field x is long in T but int in U"},
		},
		{
			name:  "own field conflicts with an inherited one",
			files: map[string]string{"a.irl": "package p\ntemplate T {\n\tlong x\n}\nentity A : T {\n\tstring[] x\n}"},
			want:  []string{"a.irl:6:11: entity A: field x is string[] but inherits long from T"},
		},
		{
			name:  "alias to a missing field",
			files: map[string]string{"a.irl": "package p\ntemplate T {\n\talias y as z\n\tlong x\n}"},
			want:  []string{"a.irl:3:13: template T: alias z names no field (y)"},
		},
		{
			name:  "alias named like a field",
			files: map[string]string{"a.irl": "package p\ntemplate T {\n\talias x as x\n\tlong x\n}"},
			want:  []string{"a.irl:3:13: template T: alias x is already a field name"},
		},
		{
			name:  "duplicate constant",
			files: map[string]string{"a.irl": "package p\nentity A {\n\tconst int C = 1\n\tconst int C = 2\n}"},
			want:  []string{"a.irl:4:12: entity A: duplicate constant C (first at a.irl:3:12)"},
		},
		{
			name: "ambiguous wildcard imports",
			files: map[string]string{"a.irl": "package p\nimport q.*\nimport r.*\nentity A : T",
				"q.irl": "package q\ntemplate T", "r.irl": "package r\ntemplate T"},
			want: []string{"a.irl:4:12: entity A: unknown template T (ambiguous: q.T and r.T)"},
		},
		{
			name:  "syntax errors in two files",
			files: map[string]string{"a.irl": "package p\nentity A {", "b.irl": "package p\n\nentity 1"},
			want:  []string{"a.irl:2:10: entity A: missing '}' for this '{'", "b.irl:3:8: missing entity name: found 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			m, err := Load(dir)
			if err == nil {
				t.Fatalf("Load succeeded: %d declarations", len(m.Decls()))
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T is not an ErrorList: %v", err, err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Error("errors.As finds no *Error")
			}
			got := strings.Split(strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""), "\n")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadResolution(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a/a.irl": "package a\nimport b.*\nimport c.Base\nentity X extends Base : T, b.U, c.V {\n\tgrouped by c.Base.id copy\n}\nentity Local : T2\ntemplate T2 { int local }",
		"b/b.irl": "package b\ntemplate T { int t }\ntemplate U { int u }",
		"c/c.irl": "package c\nabstract entity Base : V { long id }\ntemplate V : W { int v }\ntemplate W { double w }",
		// An identical re-definition in another file is accepted.
		"d/dup.irl": "package b\n/** other doc */ template U {\n\tint u\n}",
	})
	m, err := Load(filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c"), filepath.Join(dir, "d"), filepath.Join(dir, "a", "a.irl"))
	if err != nil {
		t.Fatal(err)
	}
	types, err := m.Types()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ty := range types {
		got = append(got, ty.String())
	}
	want := []string{"a.X { double w; int v; long id; int t; int u; long copy }", "a.Local { int local }"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
	if n := len(m.Files()); n != 4 {
		t.Errorf("%d files, want 4 (a.irl given twice)", n)
	}
	if d := m.Decl("b.U"); d == nil || filepath.Base(m.File(d).Name) != "b.irl" {
		t.Errorf("b.U should come from b.irl")
	}
}

func TestLoadPaths(t *testing.T) {
	dir := writeFiles(t, map[string]string{"empty/readme.txt": "x", "x.txt": "package p\nentity E"})
	if _, err := Load(); err == nil {
		t.Error("Load() succeeded")
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "empty")); err == nil || !strings.Contains(err.Error(), "no .irl files in") {
		t.Errorf("empty directory: %v", err)
	}
	// A file named explicitly is loaded whatever its extension.
	m, err := Load(filepath.Join(dir, "x.txt"))
	if err != nil || m.Decl("p.E") == nil {
		t.Errorf("explicit file: %v", err)
	}
	if _, err := (Config{MaxFileSize: 5}).Load(filepath.Join(dir, "x.txt")); err == nil || !strings.HasSuffix(err.Error(), "x.txt:1:1: file size 18 over the limit 5") {
		t.Errorf("size limit: %v", err)
	}
	if _, err := (Config{MaxFiles: 1}).Load(testcorpus.Path(t, "kieker-irl")); err == nil || !strings.Contains(err.Error(), "more than 1 files") {
		t.Errorf("file limit: %v", err)
	}
}

func TestMultiDimensionalArray(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.irl": "package p\nentity E {\n\tint[2][] grid\n}"})
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Fields(m.Decl("p.E"))[0]; !slices.Equal(f.Dims, []int{2, 0}) {
		t.Errorf("dims %v", f.Dims)
	}
	_, err = m.Types()
	if err == nil || !strings.HasSuffix(err.Error(), "a.irl:3:11: entity E: field grid: multi-dimensional arrays are not supported") {
		t.Errorf("error %v", err)
	}
}
