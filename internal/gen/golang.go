package gen

import (
	"bytes"
	"fmt"
	"go/format"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

// goType holds the Go names of one record type.
type goType struct {
	*tinfo
	name    string   // the struct
	ctor    string   // New<name>
	fields  []string // struct field names
	consts  []string // constant identifiers
	cvar    []bool   // the constant is a var (arrays, non-finite floats)
	aliases []string // alias method names, "" when the name is taken
}

var goKinds = map[record.Kind]string{
	record.Bool: "bool", record.Byte: "int8", record.Short: "int16", record.Int: "int32",
	record.Long: "int64", record.Float: "float32", record.Double: "float64", record.Char: "uint16",
	record.String: "string",
}

func goFieldType(k record.Kind, array bool) string {
	if array {
		return "[]" + goKinds[k]
	}
	return goKinds[k]
}

func genGo(ts []*tinfo, o Options) ([]File, error) {
	pkg := newNamer("Record", "Registry", "NewRegistry", "NoTimestamp", "ErrTooLong", "ErrNoRegistry",
		"TestRoundTrip", "TestRoundTripErrors", "BenchmarkAppendKDB", "BenchmarkAppendKieker")
	names, err := typeIdents(ts, pkg, func(s string) string { return exported(ident(s)) })
	if err != nil {
		return nil, err
	}
	gts := make([]*goType, len(ts))
	for i, t := range ts {
		g := &goType{tinfo: t, name: names[i]}
		members := newNamer("KiekerClass", "AppendKDB", "AppendKieker", "check")
		for _, f := range t.fields {
			g.fields = append(g.fields, members.take(exported(ident(f.name))))
		}
		for _, a := range t.aliases {
			id := exported(ident(a.name))
			if members.used[id] {
				g.aliases = append(g.aliases, "")
				continue
			}
			g.aliases = append(g.aliases, members.take(id))
		}
		gts[i] = g
	}
	// Package-level names after all types, so a type keeps its own name.
	for _, g := range gts {
		g.ctor = pkg.take("New" + g.name)
		for _, c := range g.tinfo.consts {
			g.consts = append(g.consts, pkg.take(g.name+"_"+ident(c.name)))
			g.cvar = append(g.cvar, c.array || !goConstable(c.kind, c.val))
		}
	}

	w := &goWriter{}
	w.header(o)
	w.p("// Package %s holds record types and their encoders: Kieker's binary", o.Package)
	w.p("// format with an inline string registry (single-socket TCP) and the Kieker")
	w.p("// Data Bridge's binary dialect (KDB).")
	w.p("//")
	w.p("// The encoders append to the caller's slice and keep nothing of it. A")
	w.p("// Registry belongs to one connection and is not safe for concurrent use;")
	w.p("// record values may be shared by goroutines that only read them.")
	w.p("package %s", o.Package)
	w.p("")
	w.p("import (")
	w.p(`"encoding/binary"`)
	w.p(`"errors"`)
	if goNeeds(ts, func(f finfo) bool { return f.array || f.kind == record.String }) {
		w.p(`"fmt"`)
	}
	if slices.ContainsFunc(gts, goUsesMath) {
		w.p(`"math"`)
	}
	w.p(`"strings"`)
	w.p(`"unicode/utf8"`)
	w.p(")")
	w.p("")
	w.raw(goTemplate["prelude"])
	for _, g := range gts {
		w.typ(g)
	}
	if w.used["registryID"] {
		w.raw(goTemplate["registryID"])
	}
	if w.used["appendBool"] {
		w.raw(goTemplate["appendBool"])
	}
	if w.used["appendString"] {
		w.raw(goTemplate["appendString"])
	}
	if w.used["checkLen"] {
		w.raw(goTemplate["checkLen"])
	}
	src, err := format.Source(w.b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("gen: formatting the Go code: %v", err)
	}
	files := []File{{Name: o.Package + ".go", Data: src}}
	if !o.Tests {
		return files, nil
	}
	test, err := goTest(gts, o)
	if err != nil {
		return nil, err
	}
	program, mapping := TestFiles(o.Lang, o.Package)
	return append(files, File{Name: program, Data: test}, File{Name: mapping, Data: mappingFile(ts)}), nil
}

func goNeeds(ts []*tinfo, pred func(finfo) bool) bool {
	for _, t := range ts {
		if slices.ContainsFunc(t.fields, pred) {
			return true
		}
	}
	return false
}

func goUsesMath(g *goType) bool {
	for _, f := range g.tinfo.fields {
		if f.array || f.kind == record.String || f.kind == record.Float || f.kind == record.Double {
			return true
		}
		if f.def != nil && !goConstable(f.kind, *f.def) {
			return true
		}
	}
	for _, c := range g.tinfo.consts {
		if (c.kind == record.Float || c.kind == record.Double) && (c.array || !goConstable(c.kind, c.val)) {
			return true
		}
	}
	return false
}

// goConstable reports whether a scalar can be a Go constant: floats must
// be finite and not negative zero.
func goConstable(k record.Kind, v record.Value) bool {
	switch k {
	case record.Float:
		f := float64(v.Float())
		return !math.IsInf(f, 0) && !math.IsNaN(f) && !(f == 0 && math.Signbit(f))
	case record.Double:
		f := v.Double()
		return !math.IsInf(f, 0) && !math.IsNaN(f) && !(f == 0 && math.Signbit(f))
	}
	return true
}

type goWriter struct {
	b    bytes.Buffer
	used map[string]bool
}

func (w *goWriter) p(format string, args ...any) {
	fmt.Fprintf(&w.b, format, args...)
	w.b.WriteByte('\n')
}

func (w *goWriter) raw(s string) { w.b.WriteString(s) }

func (w *goWriter) use(name string) {
	if w.used == nil {
		w.used = map[string]bool{}
	}
	w.used[name] = true
}

func (w *goWriter) header(o Options) {
	w.p("// Code generated by %s; DO NOT EDIT.", o.Command)
	w.p("")
}

func (w *goWriter) comment(lines []string) {
	for _, l := range lines {
		if l == "" {
			w.p("//")
		} else {
			w.p("// %s", l)
		}
	}
}

func (w *goWriter) typ(g *goType) {
	t := g.tinfo
	w.p("// %s is the record %s.", g.name, t.rt.Name)
	if len(t.doc) > 0 {
		w.p("//")
		w.comment(t.doc)
	}
	w.p("type %s struct {", g.name)
	for i, f := range t.fields {
		w.comment(f.doc)
		if f.note != "" {
			w.p("// %s", f.note)
		}
		w.p("%s %s", g.fields[i], goFieldType(f.kind, f.array))
	}
	w.p("}")
	w.p("")

	for i, c := range t.consts {
		w.comment(c.doc)
		if g.cvar[i] {
			w.p("var %s = %s", g.consts[i], goValue(c.kind, c.array, c.val))
		} else {
			w.p("const %s %s = %s", g.consts[i], goFieldType(c.kind, c.array), goValue(c.kind, c.array, c.val))
		}
		w.p("")
	}

	w.p("// %s returns a record %s holding the IRL defaults (zero values where", g.ctor, g.name)
	w.p("// the IRL gives none).")
	w.p("func %s() %s {", g.ctor, g.name)
	var inits []string
	for i, f := range t.fields {
		if f.def == nil {
			continue
		}
		v := goValue(f.kind, f.array, *f.def)
		if f.defConst >= 0 {
			v = g.consts[f.defConst]
			if f.array {
				// Copy, so that a record never aliases the package's default.
				v = "append(" + goFieldType(f.kind, true) + "(nil), " + v + "...)"
			}
		}
		inits = append(inits, fmt.Sprintf("%s: %s,", g.fields[i], v))
	}
	if len(inits) == 0 {
		w.p("return %s{}", g.name)
	} else {
		w.p("return %s{", g.name)
		for _, s := range inits {
			w.p("%s", s)
		}
		w.p("}")
	}
	w.p("}")
	w.p("")

	for i, a := range t.aliases {
		if g.aliases[i] == "" {
			continue
		}
		f := t.fields[a.field]
		w.p("// %s returns %s (the IRL alias %s).", g.aliases[i], g.fields[a.field], a.name)
		w.p("func (r *%s) %s() %s { return r.%s }", g.name, g.aliases[i], goFieldType(f.kind, f.array), g.fields[a.field])
		w.p("")
	}

	w.p("// KiekerClass returns %q.", t.rt.Name)
	w.p("func (*%s) KiekerClass() string { return %s }", g.name, strconv.Quote(t.rt.Name))
	w.p("")

	variable := slices.ContainsFunc(t.fields, func(f finfo) bool { return f.array || f.kind == record.String })
	if variable {
		w.use("checkLen")
		w.p("// check fails for a string or array too long for its int32 length.")
		w.p("func (r *%s) check() error {", g.name)
		for i, f := range t.fields {
			switch {
			case f.array && f.kind == record.String:
				w.p("if err := checkLen(%q, %q, len(r.%s)); err != nil { return err }", t.short, f.name, g.fields[i])
				w.p("for _, s := range r.%s {", g.fields[i])
				w.p("if err := checkLen(%q, %q, len(s)); err != nil { return err }", t.short, f.name)
				w.p("}")
			case f.array || f.kind == record.String:
				w.p("if err := checkLen(%q, %q, len(r.%s)); err != nil { return err }", t.short, f.name, g.fields[i])
			}
		}
		w.p("return nil")
		w.p("}")
		w.p("")
	}

	w.p("// AppendKDB appends the record in the KDB binary dialect under id. On")
	w.p("// error dst is returned unchanged.")
	w.p("func (r *%s) AppendKDB(dst []byte, id int32) ([]byte, error) {", g.name)
	if variable {
		w.p("if err := r.check(); err != nil { return dst, err }")
	}
	w.p("dst = binary.BigEndian.AppendUint32(dst, uint32(id))")
	g.putFields(w, nil)
	w.p("return dst, nil")
	w.p("}")
	w.p("")

	w.p("// AppendKieker appends the record as a Kieker binary frame, preceded by the")
	w.p("// registry entries of its strings that reg has not seen yet (the class")
	w.p("// name first, then the string fields in order). On error dst and reg are")
	w.p("// unchanged.")
	w.p("func (r *%s) AppendKieker(dst []byte, reg *Registry, loggingTimestamp int64) ([]byte, error) {", g.name)
	w.p("if reg == nil { return dst, ErrNoRegistry }")
	if variable {
		w.p("if err := r.check(); err != nil { return dst, err }")
	}
	// Ids of the class name and the scalar strings are kept in locals;
	// those of array elements are looked up again.
	var ids []string
	strID := map[int]string{}
	ids = append(ids, "cid")
	for i, f := range t.fields {
		if f.kind == record.String && !f.array {
			strID[i] = fmt.Sprintf("s%d", len(ids))
			ids = append(ids, strID[i])
		}
	}
	w.p("var %s uint32", strings.Join(ids, ", "))
	w.p("dst, cid = reg.add(dst, %s)", strconv.Quote(t.rt.Name))
	for i, f := range t.fields {
		if f.kind != record.String {
			continue
		}
		if f.array {
			w.p("for _, s := range r.%s { dst, _ = reg.add(dst, s) }", g.fields[i])
		} else {
			w.p("dst, %s = reg.add(dst, r.%s)", strID[i], g.fields[i])
		}
	}
	w.p("dst = binary.BigEndian.AppendUint32(dst, cid)")
	w.p("dst = binary.BigEndian.AppendUint64(dst, uint64(loggingTimestamp))")
	g.putFields(w, strID)
	w.p("return dst, nil")
	w.p("}")
	w.p("")
}

// putFields writes the statements appending the fields of r: for KDB
// when strID is nil, else for Kieker, with the registry ids of the scalar
// strings in the locals strID names by field.
func (g *goType) putFields(w *goWriter, strID map[int]string) {
	kieker := strID != nil
	for i, f := range g.tinfo.fields {
		x := "r." + g.fields[i]
		if f.array {
			w.p("dst = binary.BigEndian.AppendUint32(dst, uint32(len(%s)))", x)
			w.p("for _, v := range %s {", x)
			w.p("%s", w.goPut(f.kind, "v", kieker))
			w.p("}")
			continue
		}
		if kieker && f.kind == record.String {
			w.p("dst = binary.BigEndian.AppendUint32(dst, %s)", strID[i])
			continue
		}
		w.p("%s", w.goPut(f.kind, x, kieker))
	}
}

// goPut returns the statement appending the value x of kind k.
func (w *goWriter) goPut(k record.Kind, x string, kieker bool) string {
	switch k {
	case record.Bool:
		w.use("appendBool")
		return fmt.Sprintf("dst = appendBool(dst, %s)", x)
	case record.Byte:
		return fmt.Sprintf("dst = append(dst, byte(%s))", x)
	case record.Short:
		return fmt.Sprintf("dst = binary.BigEndian.AppendUint16(dst, uint16(%s))", x)
	case record.Char:
		return fmt.Sprintf("dst = binary.BigEndian.AppendUint16(dst, %s)", x)
	case record.Int:
		return fmt.Sprintf("dst = binary.BigEndian.AppendUint32(dst, uint32(%s))", x)
	case record.Long:
		return fmt.Sprintf("dst = binary.BigEndian.AppendUint64(dst, uint64(%s))", x)
	case record.Float:
		return fmt.Sprintf("dst = binary.BigEndian.AppendUint32(dst, math.Float32bits(%s))", x)
	case record.Double:
		return fmt.Sprintf("dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(%s))", x)
	case record.String:
		if kieker {
			w.use("registryID")
			return fmt.Sprintf("dst = binary.BigEndian.AppendUint32(dst, reg.id(%s))", x)
		}
		w.use("appendString")
		return fmt.Sprintf("dst = appendString(dst, %s)", x)
	}
	return ""
}

// goValue renders a value as a Go expression of the field's type.
func goValue(k record.Kind, array bool, v record.Value) string {
	if array {
		return goFieldType(k, true) + "{" + listItems(v, func(it record.Value) string { return goValue(k, false, it) }) + "}"
	}
	switch k {
	case record.Bool:
		return strconv.FormatBool(v.Bool())
	case record.Float:
		if !goConstable(k, v) {
			return fmt.Sprintf("math.Float32frombits(0x%08x)", math.Float32bits(v.Float()))
		}
		return floatLit(strconv.FormatFloat(float64(v.Float()), 'g', -1, 32))
	case record.Double:
		if !goConstable(k, v) {
			return fmt.Sprintf("math.Float64frombits(0x%016x)", v.Bits())
		}
		return floatLit(strconv.FormatFloat(v.Double(), 'g', -1, 64))
	case record.String:
		return strconv.Quote(v.Str())
	case record.Char:
		return strconv.FormatInt(int64(uint16(v.Int())), 10)
	}
	return strconv.FormatInt(v.Int(), 10)
}

// floatLit makes a decimal number read as a floating-point literal.
func floatLit(s string) string {
	if strings.ContainsAny(s, ".eEn") { // n: NaN/Inf never get here
		return s
	}
	return s + ".0"
}

// goTest writes the round-trip test of the Go code.
func goTest(gts []*goType, o Options) ([]byte, error) {
	ts := infos(gts)
	samples, exp, err := testData(ts)
	if err != nil {
		return nil, err
	}
	w := &goWriter{}
	w.header(o)
	w.p("package %s", o.Package)
	w.p("")
	w.p("import (")
	w.p(`"errors"`)
	w.p(`"flag"`)
	usesMath := false
	for _, r := range samples {
		for i, f := range r.Type.Fields {
			if f.Kind == record.Float || f.Kind == record.Double {
				usesMath = usesMath || strings.Contains(goValue(f.Kind, f.Array, r.Values[i]), "math.")
			}
		}
	}
	if usesMath {
		w.p(`"math"`)
	}
	w.p(`"os"`)
	w.p(`"path/filepath"`)
	w.p(`"testing"`)
	w.p(")")
	w.p("")
	w.p("var roundTripOut = flag.String(\"out\", \"\", \"directory to write kdb.bin and kieker.bin to (default: a temporary one)\")")
	w.p("")
	w.p("// roundTripSample is a sample record with the bytes tracebridge's own")
	w.p("// encoders produce for it (KDB under id; Kieker with one registry for all")
	w.p("// samples in order, logging timestamp ts).")
	w.p("type roundTripSample struct {")
	w.p("what string")
	w.p("r Record")
	w.p("id int32")
	w.p("ts int64")
	w.p("kdb, kieker string")
	w.p("}")
	w.p("")
	w.p("func roundTripSamples() []roundTripSample {")
	w.p("return []roundTripSample{")
	for i, r := range samples {
		g := gts[i/SamplesPerType]
		w.p("{%q, &%s{", fmt.Sprintf("%s sample %d", g.short, i%SamplesPerType), g.name)
		for j, f := range r.Type.Fields {
			w.p("%s: %s,", g.fields[j], goValue(f.Kind, f.Array, r.Values[j]))
		}
		w.p("}, %d, %d,", g.id, r.LoggingTimestamp)
		w.p("%s,", goBytes(exp.kdb[i]))
		w.p("%s},", goBytes(exp.kieker[i]))
	}
	w.p("}")
	w.p("}")
	w.p("")
	w.p("// TestRoundTrip encodes sample records of every type in both formats,")
	w.p("// compares the bytes with those tracebridge's own encoders produce for")
	w.p("// the same records, and writes the streams to kdb.bin and kieker.bin.")
	w.p("func TestRoundTrip(t *testing.T) {")
	w.p("var kdb, kieker []byte")
	w.p("reg := NewRegistry()")
	w.p("samples := roundTripSamples()")
	w.p("for _, s := range samples {")
	w.p("var err error")
	w.p("start := len(kdb)")
	w.p("if kdb, err = s.r.AppendKDB(kdb, s.id); err != nil { t.Fatalf(\"%%s: AppendKDB: %%v\", s.what, err) }")
	w.p("if got := string(kdb[start:]); got != s.kdb { t.Errorf(\"%%s: KDB bytes\\n got %%x\\nwant %%x\", s.what, got, s.kdb) }")
	w.p("start = len(kieker)")
	w.p("if kieker, err = s.r.AppendKieker(kieker, reg, s.ts); err != nil { t.Fatalf(\"%%s: AppendKieker: %%v\", s.what, err) }")
	w.p("if got := string(kieker[start:]); got != s.kieker { t.Errorf(\"%%s: Kieker bytes\\n got %%x\\nwant %%x\", s.what, got, s.kieker) }")
	w.p("}")
	w.p("dir := *roundTripOut")
	w.p("if dir == \"\" { dir = t.TempDir() }")
	w.p("if err := os.WriteFile(filepath.Join(dir, \"kdb.bin\"), kdb, 0o644); err != nil { t.Fatal(err) }")
	w.p("if err := os.WriteFile(filepath.Join(dir, \"kieker.bin\"), kieker, 0o644); err != nil { t.Fatal(err) }")
	w.p("t.Logf(\"%%d records: kdb.bin %%d bytes, kieker.bin %%d bytes, %%d strings registered\", len(samples), len(kdb), len(kieker), reg.Len())")
	w.p("}")
	w.p("")
	if err := goErrorPaths(w, gts, samples); err != nil {
		return nil, err
	}
	w.p("")
	w.p("// BenchmarkAppendKDB encodes every sample record per iteration.")
	w.p("func BenchmarkAppendKDB(b *testing.B) {")
	w.p("samples := roundTripSamples()")
	w.p("var buf []byte")
	w.p("for _, s := range samples { buf = append(buf, s.kdb...) }")
	w.p("b.SetBytes(int64(len(buf)))")
	w.p("b.ReportAllocs()")
	w.p("for i := 0; i < b.N; i++ {")
	w.p("buf = buf[:0]")
	w.p("for _, s := range samples {")
	w.p("var err error")
	w.p("if buf, err = s.r.AppendKDB(buf, s.id); err != nil { b.Fatal(err) }")
	w.p("}")
	w.p("}")
	w.p("}")
	w.p("")
	w.p("// BenchmarkAppendKieker encodes every sample record per iteration, with")
	w.p("// a registry that knows their strings (a connection's steady state).")
	w.p("func BenchmarkAppendKieker(b *testing.B) {")
	w.p("samples := roundTripSamples()")
	w.p("reg := NewRegistry()")
	w.p("var buf []byte")
	w.p("for _, s := range samples {")
	w.p("var err error")
	w.p("if buf, err = s.r.AppendKieker(buf, reg, s.ts); err != nil { b.Fatal(err) }")
	w.p("}")
	w.p("n := 0")
	w.p("for _, s := range samples {")
	w.p("var err error")
	w.p("start := len(buf)")
	w.p("if buf, err = s.r.AppendKieker(buf, reg, s.ts); err != nil { b.Fatal(err) }")
	w.p("n += len(buf) - start")
	w.p("}")
	w.p("b.SetBytes(int64(n))")
	w.p("b.ReportAllocs()")
	w.p("for i := 0; i < b.N; i++ {")
	w.p("buf = buf[:0]")
	w.p("for _, s := range samples {")
	w.p("var err error")
	w.p("if buf, err = s.r.AppendKieker(buf, reg, s.ts); err != nil { b.Fatal(err) }")
	w.p("}")
	w.p("}")
	w.p("}")
	src, err := format.Source(w.b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("gen: formatting the Go test: %v", err)
	}
	return src, nil
}

// goErrorPaths writes TestRoundTripErrors: a nil registry is an error
// that leaves dst as it was, and a string that is not valid UTF-8 is
// written as tracebridge's encoders write it (as is to KDB, with U+FFFD to
// Kieker).
func goErrorPaths(w *goWriter, gts []*goType, samples []record.Record) error {
	ts := infos(gts)
	k := errorType(ts)
	g := gts[k]
	rec := samples[k*SamplesPerType].Clone()
	w.p("// TestRoundTripErrors checks a nil registry and a string that is not valid")
	w.p("// UTF-8 (written as it is to KDB, with U+FFFD to Kieker, as tracebridge's")
	w.p("// encoders write it).")
	w.p("func TestRoundTripErrors(t *testing.T) {")
	w.p("s := roundTripSamples()[%d]", k*SamplesPerType)
	w.p("r := s.r.(*%s)", g.name)
	w.p("if got, err := r.AppendKieker([]byte(\"x\"), nil, s.ts); !errors.Is(err, ErrNoRegistry) || string(got) != \"x\" {")
	w.p("t.Errorf(\"nil registry: %%q, %%v\", got, err)")
	w.p("}")
	if i := firstField(g.tinfo, func(f finfo) bool { return !f.array && f.kind == record.String }); i >= 0 {
		rec.Values[i] = record.StringValue("\xff invalid \xc3")
		wantKDB, err := kdb.AppendBinary(nil, g.id, &rec)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, g.rt.Name, err)
		}
		wantKieker, err := kieker.NewEncoder(kieker.EncoderOptions{Inline: true}).Append(nil, &rec)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, g.rt.Name, err)
		}
		w.p("r.%s = %q", g.fields[i], rec.Values[i].Str())
		w.p("if got, err := r.AppendKDB(nil, s.id); err != nil || string(got) != %s {", goBytes(wantKDB))
		w.p("t.Errorf(\"KDB with invalid UTF-8: %%x, %%v\", got, err)")
		w.p("}")
		w.p("if got, err := r.AppendKieker(nil, NewRegistry(), s.ts); err != nil || string(got) != %s {", goBytes(wantKieker))
		w.p("t.Errorf(\"Kieker with invalid UTF-8: %%x, %%v\", got, err)")
		w.p("}")
	}
	w.p("}")
	return nil
}

// goBytes renders bytes as a Go string literal of \x escapes.
func goBytes(b []byte) string {
	var s strings.Builder
	s.WriteByte('"')
	for _, c := range b {
		fmt.Fprintf(&s, "\\x%02x", c)
	}
	s.WriteByte('"')
	return s.String()
}
