package gen

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// perlFormat is the pack template of a kind (strings: the Kieker id).
var perlFormat = map[record.Kind]string{
	record.Bool: "C", record.Byte: "c", record.Short: "s>", record.Int: "l>", record.Long: "q>",
	record.Float: "f>", record.Double: "d>", record.Char: "n", record.String: "l>",
}

// perlReserved are sub names a record package defines or must not define.
var perlReserved = []string{"new", "encode_kdb", "encode_kieker", "CLASS", "FIELDS", "BEGIN", "END",
	"INIT", "CHECK", "UNITCHECK", "DESTROY", "AUTOLOAD", "import", "unimport", "can", "isa", "DOES",
	"VERSION", "__ANON__", "__END__", "__DATA__", "__FILE__", "__LINE__", "__PACKAGE__", "__SUB__",
	"s", "y", "tr", "q", "qq", "qw", "qr", "qx", "m"}

type perlType struct {
	*tinfo
	pkg       string   // Package::Type
	accessors []string // "" when the name is taken
	consts    []string
	aliases   []string
}

func genPerl(ts []*tinfo, o Options) ([]File, error) {
	pkgs := newNamer(o.Package+"::Registry", o.Package+"::Record")
	names, err := typeIdents(ts, pkgs, func(s string) string { return o.Package + "::" + ident(s) })
	if err != nil {
		return nil, err
	}
	pts := make([]*perlType, len(ts))
	for i, t := range ts {
		p := &perlType{tinfo: t, pkg: names[i]}
		scope := newNamer(perlReserved...)
		for _, f := range t.fields {
			id := ident(f.name)
			if scope.used[id] {
				p.accessors = append(p.accessors, "")
				continue
			}
			p.accessors = append(p.accessors, scope.take(id))
		}
		for _, a := range t.aliases {
			id := ident(a.name)
			if scope.used[id] {
				p.aliases = append(p.aliases, "")
				continue
			}
			p.aliases = append(p.aliases, scope.take(id))
		}
		for _, c := range t.consts {
			p.consts = append(p.consts, scope.take(ident(c.name)))
		}
		pts[i] = p
	}

	w := &pyWriter{} // same line syntax: '#' comments
	w.header(o)
	w.raw(strings.ReplaceAll(perlTemplate["prelude"], "PKG", o.Package))
	for _, p := range pts {
		perlEmitType(w, p, o)
	}
	w.raw(perlTemplate["end"])
	file := strings.ReplaceAll(o.Package, "::", "/") + ".pm"
	files := []File{{Name: file, Data: w.b.Bytes()}}
	if !o.Tests {
		return files, nil
	}
	test, err := perlTest(pts, o)
	if err != nil {
		return nil, err
	}
	program, mapping := TestFiles(o.Lang, o.Package)
	return append(files, File{Name: program, Data: test}, File{Name: mapping, Data: mappingFile(ts)}), nil
}

func perlEmitType(w *pyWriter, p *perlType, o Options) {
	t := p.tinfo
	w.p("package %s;", p.pkg)
	w.p("")
	w.p("# The record %s.", oneLine(t.rt.Name))
	if len(t.doc) > 0 {
		w.p("#")
		w.comment("", t.doc)
	}
	w.p("")
	w.p("use strict;")
	w.p("use warnings;")
	w.p("")
	w.p("use constant CLASS => %s;", perlString(t.rt.Name))
	for i, c := range t.consts {
		w.comment("", c.doc)
		w.p("use constant %s => %s;", p.consts[i], perlValue(c.kind, c.array, c.val, false))
	}
	var fields []string
	for _, f := range t.fields {
		fields = append(fields, perlString(f.name))
	}
	w.p("our @FIELDS = (%s);", strings.Join(fields, ", "))
	w.p("")

	w.p("# new returns a record; arguments are field => value pairs.")
	w.p("sub new {")
	w.p("\tmy ($class, %%args) = @_;")
	w.p("\tmy $self = bless {")
	for _, f := range t.fields {
		w.comment("\t\t", f.doc)
		if f.note != "" {
			w.p("\t\t# %s", f.note)
		}
		var v string
		switch {
		case f.defConst >= 0 && f.array:
			v = "[@{ " + p.consts[f.defConst] + "() }]"
		case f.defConst >= 0:
			v = p.consts[f.defConst] + "()"
		case f.def != nil:
			v = perlValue(f.kind, f.array, *f.def, false)
		case f.array:
			v = "[]"
		case f.kind == record.String:
			v = "''"
		default:
			v = perlValue(f.kind, false, record.Value{}, false)
		}
		w.p("\t\t%s => %s,", perlString(f.name), v)
	}
	w.p("\t}, $class;")
	w.p("\tfor my $k (keys %%args) {")
	w.p("\t\tCarp::croak(\"$class has no field $k\") unless exists $self->{$k};")
	w.p("\t\t$self->{$k} = $args{$k};")
	w.p("\t}")
	w.p("\treturn $self;")
	w.p("}")
	w.p("")

	w.p("# encode_kdb returns the record in the KDB binary dialect under an id.")
	w.p("sub encode_kdb {")
	w.p("\tmy ($self, $id) = @_;")
	kdb := perlPack(p, o.Package, false)
	if perlUsesArrays(t) {
		w.p("\tmy $arr;")
	}
	for _, s := range kdb {
		w.p("\t%s", s)
	}
	w.p("\treturn $out;")
	w.p("}")
	w.p("")

	w.p("# encode_kieker returns the record as a Kieker binary frame, preceded by")
	w.p("# the registry entries of its strings the registry has not seen (the class")
	w.p("# name first, then the string fields in order).")
	w.p("sub encode_kieker {")
	w.p("\tmy ($self, $reg, $ts) = @_;")
	w.p("\tCarp::croak('encode_kieker needs a registry') unless ref $reg;")
	w.p("\t$ts = -1 unless defined $ts;")
	strs := []string{o.Package + "::_utf8(CLASS)"}
	for _, f := range t.fields {
		if f.kind != record.String {
			continue
		}
		x := "$self->{" + perlString(f.name) + "}"
		if f.array {
			strs = append(strs, "(map { "+o.Package+"::_utf8($_) } @{ "+x+" || [] })")
		} else {
			strs = append(strs, o.Package+"::_utf8("+x+")")
		}
	}
	w.p("\tmy ($ids, $new, $entries) = $reg->_resolve(%s);", strings.Join(strs, ", "))
	if perlUsesArrays(t) {
		w.p("\tmy ($arr, $k);")
	}
	for _, s := range perlPack(p, o.Package, true) {
		w.p("\t%s", s)
	}
	w.p("\t$reg->_commit($new);")
	w.p("\treturn $entries . $out;")
	w.p("}")
	w.p("")

	// Accessors last, so that a field named like a Perl builtin (wait,
	// values) does not make earlier calls of the builtin ambiguous.
	for i, f := range t.fields {
		if p.accessors[i] == "" {
			w.p("# No accessor for %s (the name is taken); use $r->{%s}.", oneLine(f.name), perlString(f.name))
			continue
		}
		w.p("sub %s { my $self = shift; $self->{%s} = shift if @_; return $self->{%s} }", p.accessors[i], perlString(f.name), perlString(f.name))
	}
	for i, a := range t.aliases {
		if p.aliases[i] == "" {
			continue
		}
		fn := perlString(t.fields[a.field].name)
		w.p("# %s is the IRL alias of %s.", p.aliases[i], oneLine(t.fields[a.field].name))
		w.p("sub %s { my $self = shift; $self->{%s} = shift if @_; return $self->{%s} }", p.aliases[i], fn, fn)
	}
	w.p("")
}

// perlPack returns the statements packing the record into $out (KDB: id
// and fields; Kieker: the frame, with the string ids of @$ids: $ids->[n]
// before the first string array, $ids->[$k + n] after it).
func perlPack(p *perlType, pkg string, kieker bool) []string {
	t := p.tinfo
	var stmts []string
	var tmpl strings.Builder
	var args []string
	if kieker {
		tmpl.WriteString("l>q>")
		args = append(args, "$ids->[0]", "$ts")
	} else {
		tmpl.WriteString("l>")
		args = append(args, "$id")
	}
	first := true
	emit := func(expr string) {
		if first {
			stmts = append(stmts, "my $out = "+expr+";")
			first = false
			return
		}
		stmts = append(stmts, "$out .= "+expr+";")
	}
	flush := func() {
		if tmpl.Len() > 0 {
			emit(fmt.Sprintf("pack('%s', %s)", tmpl.String(), strings.Join(args, ", ")))
		}
		tmpl.Reset()
		args = nil
	}
	afterArray, off := false, 1
	idExpr := func() string {
		switch {
		case !afterArray:
			return fmt.Sprintf("$ids->[%d]", off)
		case off == 0:
			return "$ids->[$k]"
		}
		return fmt.Sprintf("$ids->[$k + %d]", off)
	}
	for _, f := range t.fields {
		x := "$self->{" + perlString(f.name) + "}"
		switch {
		case f.array:
			flush()
			stmts = append(stmts, "$arr = "+x+" || [];")
			switch {
			case f.kind == record.String && kieker:
				switch {
				case !afterArray:
					stmts = append(stmts, fmt.Sprintf("$k = %d;", off))
				case off > 0:
					stmts = append(stmts, fmt.Sprintf("$k += %d;", off))
				}
				emit("pack('l>l>*', scalar(@$arr), @{$ids}[$k .. $k + $#$arr])")
				stmts = append(stmts, "$k += @$arr;")
				afterArray, off = true, 0
			case f.kind == record.String:
				emit("pack('l>', scalar(@$arr)) . join('', map { " + pkg + "::_kdb_str($_) } @$arr)")
			case f.kind == record.Bool:
				emit("pack('l>C*', scalar(@$arr), map { $_ ? 1 : 0 } @$arr)")
			default:
				emit("pack('l>" + perlFormat[f.kind] + "*', scalar(@$arr), @$arr)")
			}
		case f.kind == record.String && kieker:
			tmpl.WriteString("l>")
			args = append(args, idExpr())
			off++
		case f.kind == record.String:
			flush()
			emit(pkg + "::_kdb_str(" + x + ")")
		case f.kind == record.Bool:
			tmpl.WriteString("C")
			args = append(args, "("+x+" ? 1 : 0)")
		default:
			tmpl.WriteString(perlFormat[f.kind])
			args = append(args, x)
		}
	}
	flush()
	return stmts
}

func perlUsesArrays(t *tinfo) bool {
	for _, f := range t.fields {
		if f.array {
			return true
		}
	}
	return false
}

// perlString renders a string as a Perl double-quoted literal of ASCII
// characters and escapes, which yields a character string.
func perlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\\' || r == '"' || r == '$' || r == '@':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, `\x{%x}`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// perlValue renders a value; with bits, floats as exact bit patterns.
func perlValue(k record.Kind, array bool, v record.Value, bits bool) string {
	if array {
		return "[" + listItems(v, func(it record.Value) string { return perlValue(k, false, it, bits) }) + "]"
	}
	switch k {
	case record.Bool:
		if v.Bool() {
			return "1"
		}
		return "0"
	case record.Float:
		f := float64(v.Float())
		if bits || !perlExact(f) {
			return fmt.Sprintf("unpack('f>', pack('H*', '%08x'))", math.Float32bits(v.Float()))
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	case record.Double:
		f := v.Double()
		if bits || !perlExact(f) {
			return fmt.Sprintf("unpack('d>', pack('H*', '%016x'))", v.Bits())
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	case record.String:
		return perlString(v.Str())
	case record.Char:
		return strconv.FormatInt(int64(uint16(v.Int())), 10)
	case record.Long:
		if v.Int() == math.MinInt64 {
			return "(-9223372036854775807 - 1)"
		}
	}
	return strconv.FormatInt(v.Int(), 10)
}

// perlExact reports whether a double is safe as a decimal Perl literal:
// finite, not negative zero, and at most 15 significant digits (perl's
// own number parser is exact within that).
func perlExact(f float64) bool {
	if math.IsNaN(f) || math.IsInf(f, 0) || f == 0 && math.Signbit(f) {
		return false
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant := strings.TrimPrefix(s[:strings.IndexByte(s, 'e')], "-")
	return len(strings.ReplaceAll(mant, ".", "")) <= 15
}

func perlTest(pts []*perlType, o Options) ([]byte, error) {
	ts := infos(pts)
	samples, exp, err := testData(ts)
	if err != nil {
		return nil, err
	}
	w := &pyWriter{}
	w.p("#!/usr/bin/env perl")
	w.header(o)
	w.raw(strings.ReplaceAll(perlTestTemplate["prelude"], "PKG", o.Package))
	for i, r := range samples {
		p := pts[i/SamplesPerType]
		var args []string
		for j, f := range r.Type.Fields {
			args = append(args, perlString(f.Name)+" => "+perlValue(f.Kind, f.Array, r.Values[j], true))
		}
		lt := perlValue(record.Long, false, record.IntValue(r.LoggingTimestamp), false)
		w.p("\t[%s, %s->new(%s), %d, %s,", perlString(fmt.Sprintf("%s sample %d", p.short, i%SamplesPerType)), p.pkg, strings.Join(args, ", "), p.id, lt)
		w.p("\t\t'%s',", hex.EncodeToString(exp.kdb[i]))
		w.p("\t\t'%s'],", hex.EncodeToString(exp.kieker[i]))
	}
	w.raw(strings.ReplaceAll(perlTestTemplate["loop"], "PKG", o.Package))
	k := errorType(ts)
	p := pts[k]
	if i := firstField(p.tinfo, func(f finfo) bool { return !f.array && f.kind == record.String }); i >= 0 {
		field := perlString(p.fields[i].name)
		w.p("")
		w.p("# Error path: a string that is not Unicode text dies and leaves the registry")
		w.p("# as it was.")
		w.p("{")
		w.p("\tmy $r = $samples[%d][1];", k*SamplesPerType)
		w.p("\tmy $saved = $r->{%s};", field)
		w.p("\t$r->{%s} = \"\\x{D800}\";", field)
		w.p("\tfor my $c (['KDB', sub { $r->encode_kdb(%d) }], ['Kieker', sub { $r->encode_kieker($_[0], %d) }]) {", p.id, samples[k*SamplesPerType].LoggingTimestamp)
		w.p("\t\tmy $fresh = %s::Registry->new;", o.Package)
		w.p("\t\tmy $got = eval { $c->[1]->($fresh) };")
		w.p("\t\tif (defined $got || $fresh->len != 0) {")
		w.p("\t\t\tprint STDERR \"error path: $c->[0] with a surrogate did not die or changed the registry\\n\";")
		w.p("\t\t\t$failures++;")
		w.p("\t\t}")
		w.p("\t}")
		w.p("\t$r->{%s} = $saved;", field)
		w.p("}")
		w.p("")
	}
	w.raw(strings.ReplaceAll(perlTestTemplate["main"], "PKG", o.Package))
	return w.b.Bytes(), nil
}
