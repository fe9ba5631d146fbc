package gen

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

// cKeywords are C99/C11 keywords, C++ keywords (the header is usable from
// C++), and macros of the standard headers the code includes or that
// compilers predefine, none of which may name a struct member.
var cKeywords = []string{
	"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
	"extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
	"short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
	"volatile", "while", "_Bool", "_Complex", "_Imaginary", "_Alignas", "_Alignof", "_Atomic",
	"_Generic", "_Noreturn", "_Static_assert", "_Thread_local",
	"bool", "true", "false", "NULL", "errno", "assert", "offsetof", "EOF", "stdin", "stdout", "stderr",
	"unix", "linux", "i386", "alignas", "alignof", "noreturn", "static_assert", "thread_local",
	"asm", "catch", "class", "const_cast", "delete", "dynamic_cast", "explicit", "export", "friend",
	"mutable", "namespace", "new", "operator", "private", "protected", "public", "reinterpret_cast",
	"static_cast", "template", "this", "throw", "try", "typeid", "typename", "using", "virtual",
	"interface", "wchar_t", "and", "or", "not", "xor", "bitand", "bitor", "compl", "and_eq", "or_eq", "xor_eq",
	"not_eq", "char16_t", "char32_t", "constexpr", "decltype", "nullptr",
}

var cKinds = map[record.Kind]string{
	record.Bool: "bool", record.Byte: "int8_t", record.Short: "int16_t", record.Int: "int32_t",
	record.Long: "int64_t", record.Float: "float", record.Double: "double", record.Char: "uint16_t",
	record.String: "const char *",
}

// cArrayKinds are the kinds with an array struct, in declaration order.
var cArrayKinds = []record.Kind{record.Bool, record.Byte, record.Short, record.Int, record.Long,
	record.Float, record.Double, record.Char, record.String}

// cType holds the C names of one record type.
type cType struct {
	*tinfo
	name    string   // P_Short
	class   string   // PU_Short_CLASS
	members []string // struct members
	consts  []string // macros (scalars) or objects (arrays)
}

type cgen struct {
	p, pu string // identifier prefix and macro prefix
	types []*cType
}

func (g *cgen) arrayType(k record.Kind) string { return g.p + "_" + k.String() + "_array" }

func (g *cgen) fieldType(k record.Kind, array bool) string {
	if array {
		return g.arrayType(k)
	}
	return cKinds[k]
}

func genC(ts []*tinfo, o Options) ([]File, error) {
	g := &cgen{p: o.Package, pu: strings.ToUpper(o.Package)}
	reserved := []string{g.p + "_buf", g.p + "_registry", g.p + "_registry_entry", g.p + "_strerror"}
	for _, k := range cArrayKinds {
		reserved = append(reserved, g.arrayType(k))
	}
	ids := newNamer(reserved...)
	names, err := typeIdents(ts, ids, func(s string) string { return g.p + "_" + ident(s) })
	if err != nil {
		return nil, err
	}
	macros := newNamer(g.pu+"_OK", g.pu+"_ENOMEM", g.pu+"_ENOSPC", g.pu+"_EINVAL", g.pu+"_EUTF8", g.pu+"_ERANGE", g.pu+"_NO_TIMESTAMP", g.pu+"_H_INCLUDED")
	for i, t := range ts {
		c := &cType{tinfo: t, name: names[i]}
		suffix := strings.TrimPrefix(c.name, g.p+"_")
		c.class = macros.take(g.pu + "_" + suffix + "_CLASS")
		members := newNamer(cKeywords...)
		for _, f := range t.fields {
			m := ident(f.name)
			if strings.HasPrefix(m, "__") || len(m) > 1 && m[0] == '_' && m[1] >= 'A' && m[1] <= 'Z' {
				m = "f" + m // reserved identifiers
			}
			c.members = append(c.members, members.take(m))
		}
		for _, k := range t.consts {
			if k.array {
				c.consts = append(c.consts, ids.take(c.name+"_"+ident(k.name)))
			} else {
				c.consts = append(c.consts, macros.take(g.pu+"_"+suffix+"_"+ident(k.name)))
			}
		}
		g.types = append(g.types, c)
	}
	files := []File{
		{Name: o.Package + ".h", Data: g.header(o)},
		{Name: o.Package + ".c", Data: g.source(o)},
	}
	if !o.Tests {
		return files, nil
	}
	test, err := g.test(o)
	if err != nil {
		return nil, err
	}
	program, mapping := TestFiles(o.Lang, o.Package)
	return append(files, File{Name: program, Data: test}, File{Name: mapping, Data: mappingFile(ts)}), nil
}

type cWriter struct{ b bytes.Buffer }

func (w *cWriter) p(format string, args ...any) {
	fmt.Fprintf(&w.b, format, args...)
	w.b.WriteByte('\n')
}

func (w *cWriter) raw(s string) { w.b.WriteString(s) }

// comment writes a block comment; indent prefixes every line.
func (w *cWriter) comment(indent string, lines []string) {
	if len(lines) == 0 {
		return
	}
	if len(lines) == 1 && lines[0] != "" {
		w.p("%s/* %s */", indent, cCommentSafe(lines[0]))
		return
	}
	w.p("%s/*", indent)
	for _, l := range lines {
		l = cCommentSafe(l)
		if l == "" {
			w.p("%s *", indent)
		} else {
			w.p("%s * %s", indent, l)
		}
	}
	w.p("%s */", indent)
}

// cCommentSafe keeps text from ending a comment or opening a nested one
// (gcc -Wcomment).
func cCommentSafe(s string) string {
	s = strings.ReplaceAll(s, "*/", "* /")
	return strings.ReplaceAll(s, "/*", "/ *")
}

func (w *cWriter) header(o Options) {
	w.p("/* Generated by %s. Do not edit. */", cCommentSafe(o.Command))
	w.p("")
}

func (g *cgen) header(o Options) []byte {
	w := &cWriter{}
	w.header(o)
	p, pu := g.p, g.pu
	r := strings.NewReplacer("P_", p+"_", "PU_", pu+"_", "P.h", p+".h")
	w.raw(r.Replace(cHeaderTemplate["prelude"]))
	for _, k := range cArrayKinds {
		items := "const " + cKinds[k] + " *items;"
		if k == record.String {
			items = "const char *const *items;"
		}
		w.p("typedef struct %s {", g.arrayType(k))
		w.p("\t%s", items)
		w.p("\tsize_t count;")
		w.p("} %s;", g.arrayType(k))
	}
	w.p("")
	for _, c := range g.types {
		g.declType(w, c)
	}
	w.raw(r.Replace(cHeaderTemplate["end"]))
	return w.b.Bytes()
}

func (g *cgen) declType(w *cWriter, c *cType) {
	t := c.tinfo
	doc := []string{fmt.Sprintf("%s is the record %s.", c.name, t.rt.Name)}
	if len(t.doc) > 0 {
		doc = append(append(doc, ""), t.doc...)
	}
	w.comment("", doc)
	w.p("typedef struct %s {", c.name)
	if len(t.fields) == 0 {
		w.p("\tchar unused_; /* C has no empty structs */")
	}
	for i, f := range t.fields {
		doc := f.doc
		if f.note != "" {
			doc = append(append([]string(nil), doc...), f.note)
		}
		w.comment("\t", doc)
		ft := g.fieldType(f.kind, f.array)
		if strings.HasSuffix(ft, "*") {
			w.p("\t%s%s;", ft, c.members[i])
		} else {
			w.p("\t%s %s;", ft, c.members[i])
		}
	}
	w.p("} %s;", c.name)
	w.p("")
	w.p("#define %s %s", c.class, cString(t.rt.Name))
	for i, k := range t.consts {
		w.comment("", k.doc)
		if k.array {
			w.p("extern const %s %s;", g.arrayType(k.kind), c.consts[i])
		} else {
			w.p("#define %s %s", c.consts[i], cConst(k.kind, k.val))
		}
	}
	for _, a := range t.aliases {
		w.p("/* IRL alias: %s is %s. */", cCommentSafe(a.name), c.members[a.field])
	}
	w.p("")
	w.p("/* %s_init sets every field of r to its IRL default (zero, false or NULL where the IRL gives none). */", c.name)
	w.p("void %s_init(%s *r);", c.name, c.name)
	w.p("/* %s_append_kdb appends r in the KDB binary dialect under id. */", c.name)
	w.p("int %s_append_kdb(%s_buf *b, int32_t id, const %s *r);", c.name, g.p, c.name)
	w.p("/*")
	w.p(" * %s_append_kieker appends r as a Kieker binary frame, preceded by the", c.name)
	w.p(" * registry entries of its strings that reg has not seen (the class name")
	w.p(" * first, then the string fields in order).")
	w.p(" */")
	w.p("int %s_append_kieker(%s_buf *b, %s_registry *reg, int64_t logging_timestamp, const %s *r);", c.name, g.p, g.p, c.name)
	w.p("")
}

func (g *cgen) source(o Options) []byte {
	w := &cWriter{}
	w.header(o)
	r := strings.NewReplacer("P_", g.p+"_", "PU_", g.pu+"_", "P.h", g.p+".h")
	w.raw(r.Replace(cSourceTemplate["prelude"]))
	for _, c := range g.types {
		g.defineType(w, c)
	}
	return w.b.Bytes()
}

// cPut returns the call writing x of kind k at p.
func (g *cgen) cPut(k record.Kind, x string, kieker bool) string {
	p := g.p
	switch k {
	case record.Bool:
		return fmt.Sprintf("p = %s_put_u8(p, %s ? 1u : 0u);", p, x)
	case record.Byte:
		return fmt.Sprintf("p = %s_put_u8(p, (unsigned)(uint8_t)%s);", p, x)
	case record.Short:
		return fmt.Sprintf("p = %s_put_u16(p, (uint16_t)%s);", p, x)
	case record.Char:
		return fmt.Sprintf("p = %s_put_u16(p, %s);", p, x)
	case record.Int:
		return fmt.Sprintf("p = %s_put_u32(p, (uint32_t)%s);", p, x)
	case record.Long:
		return fmt.Sprintf("p = %s_put_u64(p, (uint64_t)%s);", p, x)
	case record.Float:
		return fmt.Sprintf("p = %s_put_f32(p, %s);", p, x)
	case record.Double:
		return fmt.Sprintf("p = %s_put_f64(p, %s);", p, x)
	case record.String:
		if kieker {
			return fmt.Sprintf("p = %s_put_u32(p, %s_reg_id(reg, %s));", p, p, x)
		}
		return fmt.Sprintf("p = %s_put_str(p, %s);", p, x)
	}
	return ""
}

func (g *cgen) defineType(w *cWriter, c *cType) {
	t := c.tinfo
	p, pu := g.p, g.pu
	for i, k := range t.consts {
		if !k.array {
			continue
		}
		items := "NULL"
		n := 0
		if l := k.val.List(); l != nil && len(l.Items) > 0 {
			n = len(l.Items)
			items = c.consts[i] + "_items_"
			w.p("static %s %s[] = %s;", cElemDecl(k.kind), items, cArrayInit(k.kind, l.Items))
		}
		w.p("const %s %s = {%s, %d};", g.arrayType(k.kind), c.consts[i], items, n)
		w.p("")
	}
	// Array defaults that are not constants.
	defaults := map[int]string{}
	for i, f := range t.fields {
		if !f.array || f.def == nil || f.defConst >= 0 {
			continue
		}
		if l := f.def.List(); l != nil && len(l.Items) > 0 {
			name := c.name + "_" + c.members[i] + "_default_"
			w.p("static %s %s[] = %s;", cElemDecl(f.kind), name, cArrayInit(f.kind, l.Items))
			w.p("")
			defaults[i] = name
		}
	}

	w.p("void %s_init(%s *r)", c.name, c.name)
	w.p("{")
	w.p("\tif (r == NULL)")
	w.p("\t\treturn;")
	if len(t.fields) == 0 {
		w.p("\tr->unused_ = 0;")
	}
	for i, f := range t.fields {
		m := "r->" + c.members[i]
		switch {
		case f.array && f.defConst >= 0:
			w.p("\t%s = %s;", m, c.consts[f.defConst])
		case f.array:
			if name, ok := defaults[i]; ok {
				w.p("\t%s.items = %s;", m, name)
				w.p("\t%s.count = %d;", m, len(f.def.List().Items))
			} else {
				w.p("\t%s.items = NULL;", m)
				w.p("\t%s.count = 0;", m)
			}
		case f.defConst >= 0:
			w.p("\t%s = %s;", m, c.consts[f.defConst])
		case f.def != nil:
			w.p("\t%s = %s;", m, cConst(f.kind, *f.def))
		case f.kind == record.String:
			w.p("\t%s = NULL;", m)
		case f.kind == record.Bool:
			w.p("\t%s = false;", m)
		case f.kind == record.Float:
			w.p("\t%s = 0.0f;", m)
		case f.kind == record.Double:
			w.p("\t%s = 0.0;", m)
		default:
			w.p("\t%s = 0;", m)
		}
	}
	w.p("}")
	w.p("")

	hasArray := false
	fixed := 0 // bytes of the scalar non-string fields
	strs := 0  // scalar string fields
	for _, f := range t.fields {
		switch {
		case f.array:
			hasArray = true
		case f.kind == record.String:
			strs++
		default:
			fixed += f.kind.Size()
		}
	}
	elemSize := func(k record.Kind, kieker bool) int {
		if k == record.String {
			if kieker {
				return 4
			}
			return 0
		}
		return k.Size()
	}

	// KDB.
	w.p("int %s_append_kdb(%s_buf *b, int32_t id, const %s *r)", c.name, p, c.name)
	w.p("{")
	w.p("\tsize_t n = %d;", 4+fixed)
	w.p("\tunsigned char *p;")
	w.p("\tint err;")
	if hasArray {
		w.p("\tsize_t i;")
	}
	w.p("\tif (b == NULL || r == NULL)")
	w.p("\t\treturn %s_EINVAL;", pu)
	for i, f := range t.fields {
		m := "r->" + c.members[i]
		switch {
		case f.array:
			w.p("\tif ((err = %s_array_size(&n, (const void *)%s.items, %s.count, %d)) != %s_OK)", p, m, m, elemSize(f.kind, false), pu)
			w.p("\t\treturn err;")
			if f.kind == record.String {
				w.p("\tfor (i = 0; i < %s.count; i++)", m)
				w.p("\t\tif ((err = %s_str_size(&n, %s.items[i])) != %s_OK)", p, m, pu)
				w.p("\t\t\treturn err;")
			}
		case f.kind == record.String:
			w.p("\tif ((err = %s_str_size(&n, %s)) != %s_OK)", p, m, pu)
			w.p("\t\treturn err;")
		}
	}
	w.p("\tif ((err = %s_grow(b, n)) != %s_OK)", p, pu)
	w.p("\t\treturn err;")
	w.p("\tp = b->data + b->len;")
	w.p("\tp = %s_put_u32(p, (uint32_t)id);", p)
	g.putFields(w, c, false)
	w.p("\t(void)p;")
	w.p("\tb->len += n;")
	w.p("\treturn %s_OK;", pu)
	w.p("}")
	w.p("")

	// Kieker.
	w.p("int %s_append_kieker(%s_buf *b, %s_registry *reg, int64_t logging_timestamp, const %s *r)", c.name, p, p, c.name)
	w.p("{")
	w.p("\tsize_t n = %d, start, mark;", 12+fixed+4*strs)
	w.p("\tunsigned char *p;")
	w.p("\tint err;")
	if hasArray {
		w.p("\tsize_t i;")
	}
	w.p("\tif (b == NULL || reg == NULL || r == NULL)")
	w.p("\t\treturn %s_EINVAL;", pu)
	for i, f := range t.fields {
		if f.array {
			m := "r->" + c.members[i]
			w.p("\tif ((err = %s_array_size(&n, (const void *)%s.items, %s.count, %d)) != %s_OK)", p, m, m, elemSize(f.kind, true), pu)
			w.p("\t\treturn err;")
		}
	}
	w.p("\tstart = b->len;")
	w.p("\tmark = reg->count;")
	w.p("\tif ((err = %s_reg_add(reg, b, %s)) != %s_OK)", p, c.class, pu)
	w.p("\t\tgoto fail;")
	for i, f := range t.fields {
		if f.kind != record.String {
			continue
		}
		m := "r->" + c.members[i]
		if f.array {
			w.p("\tfor (i = 0; i < %s.count; i++)", m)
			w.p("\t\tif ((err = %s_reg_add(reg, b, %s.items[i])) != %s_OK)", p, m, pu)
			w.p("\t\t\tgoto fail;")
		} else {
			w.p("\tif ((err = %s_reg_add(reg, b, %s)) != %s_OK)", p, m, pu)
			w.p("\t\tgoto fail;")
		}
	}
	w.p("\tif ((err = %s_grow(b, n)) != %s_OK)", p, pu)
	w.p("\t\tgoto fail;")
	w.p("\tp = b->data + b->len;")
	w.p("\tp = %s_put_u32(p, %s_reg_id(reg, %s));", p, p, c.class)
	w.p("\tp = %s_put_u64(p, (uint64_t)logging_timestamp);", p)
	g.putFields(w, c, true)
	w.p("\t(void)p;")
	w.p("\tb->len += n;")
	w.p("\treturn %s_OK;", pu)
	w.p("fail:")
	w.p("\tb->len = start;")
	w.p("\t%s_registry_rollback(reg, mark);", p)
	w.p("\treturn err;")
	w.p("}")
	w.p("")
}

func (g *cgen) putFields(w *cWriter, c *cType, kieker bool) {
	for i, f := range c.tinfo.fields {
		m := "r->" + c.members[i]
		if f.array {
			w.p("\tp = %s_put_u32(p, (uint32_t)%s.count);", g.p, m)
			w.p("\tfor (i = 0; i < %s.count; i++)", m)
			w.p("\t\t%s", g.cPut(f.kind, m+".items[i]", kieker))
			continue
		}
		w.p("\t%s", g.cPut(f.kind, m, kieker))
	}
}

// cElemDecl is the element type of a static array of kind k.
func cElemDecl(k record.Kind) string {
	if k == record.String {
		return "const char *const"
	}
	return "const " + cKinds[k]
}

func cArrayInit(k record.Kind, items []record.Value) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = cConst(k, it)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// cConst renders a scalar as a C constant expression.
func cConst(k record.Kind, v record.Value) string {
	switch k {
	case record.Bool:
		return strconv.FormatBool(v.Bool())
	case record.Long:
		if v.Int() == math.MinInt64 {
			return "(-INT64_C(9223372036854775807) - 1)"
		}
		return "INT64_C(" + strconv.FormatInt(v.Int(), 10) + ")"
	case record.Int:
		if v.Int() == math.MinInt32 {
			return "(-2147483647 - 1)"
		}
	case record.Char:
		return strconv.FormatInt(int64(uint16(v.Int())), 10) + "u"
	case record.Float:
		f := float64(v.Float())
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return cNonFinite(f, "f") // IRL cannot write these
		case f == 0 && math.Signbit(f):
			return "(-0.0f)"
		}
		return "(" + floatLit(strconv.FormatFloat(f, 'g', -1, 32)) + "f)"
	case record.Double:
		f := v.Double()
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return cNonFinite(f, "") // IRL cannot write these
		case f == 0 && math.Signbit(f):
			return "(-0.0)"
		}
		return "(" + floatLit(strconv.FormatFloat(f, 'g', -1, 64)) + ")"
	case record.String:
		return cString(v.Str())
	}
	if v.Int() < 0 {
		return "(" + strconv.FormatInt(v.Int(), 10) + ")"
	}
	return strconv.FormatInt(v.Int(), 10)
}

// cNonFinite renders an infinity or NaN as a constant expression without
// <math.h>.
func cNonFinite(f float64, suffix string) string {
	inf := "(1e30" + suffix + " * 1e30" + suffix + " * 1e30" + suffix + ")"
	switch {
	case math.IsNaN(f):
		return "(0.0" + suffix + " * " + inf + ")"
	case f < 0:
		return "(-" + inf + ")"
	}
	return inf
}

// cString renders s as a C string literal: printable ASCII as is, the
// rest as octal escapes (never hex: a hex escape swallows following hex
// digits), '?' escaped against trigraphs.
func cString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\' || c == '?':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\%03o", c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// cSample renders a sample scalar for the test program, floats by their
// bits.
func cSample(k record.Kind, v record.Value) string {
	switch k {
	case record.Float:
		return fmt.Sprintf("f32_(UINT32_C(0x%08x))", math.Float32bits(v.Float()))
	case record.Double:
		return fmt.Sprintf("f64_(UINT64_C(0x%016x))", v.Bits())
	}
	return cConst(k, v)
}

func (g *cgen) test(o Options) ([]byte, error) {
	ts := infos(g.types)
	samples, exp, err := testData(ts)
	if err != nil {
		return nil, err
	}
	p := g.p
	w := &cWriter{}
	w.header(o)
	r := strings.NewReplacer("P_", p+"_", "PU_", g.pu+"_", "P.h", p+".h")
	w.raw(r.Replace(cTestTemplate["prelude"]))
	w.p("int main(int argc, char **argv)")
	w.p("{")
	w.p("\tconst char *dir = argc > 1 ? argv[1] : \".\";")
	w.p("\t%s_buf kdb, kieker;", p)
	w.p("\t%s_registry reg;", p)
	w.p("\t%s_buf_init(&kdb);", p)
	w.p("\t%s_buf_init(&kieker);", p)
	w.p("\t%s_registry_init(&reg);", p)
	for i, rec := range samples {
		c := g.types[i/SamplesPerType]
		what := fmt.Sprintf("%s sample %d", c.short, i%SamplesPerType)
		w.p("\t{")
		w.p("\t\tstatic const unsigned char want_kdb[] = %s;", cBytes(exp.kdb[i]))
		w.p("\t\tstatic const unsigned char want_kieker[] = %s;", cBytes(exp.kieker[i]))
		w.p("\t\t%s r;", c.name)
		w.p("\t\tsize_t start;")
		g.sampleRecord(w, c, &samples[i])
		w.p("\t\tstart = kdb.len;")
		w.p("\t\tcheck(%s, \"KDB\", %s_append_kdb(&kdb, %d, &r), &kdb, start, want_kdb, sizeof want_kdb);", cString(what), c.name, c.id)
		w.p("\t\tstart = kieker.len;")
		w.p("\t\tcheck(%s, \"Kieker\", %s_append_kieker(&kieker, &reg, %s, &r), &kieker, start, want_kieker, sizeof want_kieker);",
			cString(what), c.name, cConst(record.Long, record.IntValue(rec.LoggingTimestamp)))
		w.p("\t}")
	}
	if err := g.errorPaths(w, samples); err != nil {
		return nil, err
	}
	w.p("\tif (write_file(dir, \"kdb.bin\", &kdb) != 0 || write_file(dir, \"kieker.bin\", &kieker) != 0)")
	w.p("\t\tfailures++;")
	w.p("\tprintf(\"%d records: kdb.bin %%lu bytes, kieker.bin %%lu bytes, %%lu strings registered\\n\",", len(samples))
	w.p("\t       (unsigned long)kdb.len, (unsigned long)kieker.len, (unsigned long)%s_registry_len(&reg));", p)
	w.p("\t%s_buf_free(&kdb);", p)
	w.p("\t%s_buf_free(&kieker);", p)
	w.p("\t%s_registry_free(&reg);", p)
	w.p("\treturn failures != 0 ? 1 : 0;")
	w.p("}")
	return w.b.Bytes(), nil
}

// sampleRecord declares the arrays of a sample and sets up r (declared by
// the caller after them... so arrays come first).
func (g *cgen) sampleRecord(w *cWriter, c *cType, rec *record.Record) {
	for j, f := range rec.Type.Fields {
		if !f.Array {
			continue
		}
		if l := rec.Values[j].List(); l != nil && len(l.Items) > 0 {
			parts := make([]string, len(l.Items))
			for e, it := range l.Items {
				parts[e] = cSample(f.Kind, it)
			}
			if f.Kind == record.Float || f.Kind == record.Double {
				// Filled at run time: f32_ and f64_ are not constant expressions.
				w.p("\t\t%s a%d[%d];", cKinds[f.Kind], j, len(parts))
				continue
			}
			w.p("\t\tstatic %s a%d[] = {%s};", cElemDecl(f.Kind), j, strings.Join(parts, ", "))
		}
	}
	w.p("\t\t%s_init(&r);", c.name)
	for j, f := range rec.Type.Fields {
		m := "r." + c.members[j]
		if !f.Array {
			w.p("\t\t%s = %s;", m, cSample(f.Kind, rec.Values[j]))
			continue
		}
		l := rec.Values[j].List()
		if l == nil || len(l.Items) == 0 {
			w.p("\t\t%s.items = NULL;", m)
			w.p("\t\t%s.count = 0;", m)
			continue
		}
		if f.Kind == record.Float || f.Kind == record.Double {
			for e, it := range l.Items {
				w.p("\t\ta%d[%d] = %s;", j, e, cSample(f.Kind, it))
			}
		}
		w.p("\t\t%s.items = a%d;", m, j)
		w.p("\t\t%s.count = %d;", m, len(l.Items))
	}
}

// errorPaths writes checks that a failing encoder leaves the buffer and
// the registry as they were: a fixed buffer one byte short (the registry
// entries fit, the frame does not), invalid UTF-8, an array without items;
// and that the same registry then encodes the record correctly.
func (g *cgen) errorPaths(w *cWriter, samples []record.Record) error {
	ts0 := make([]*tinfo, len(g.types))
	for i, c := range g.types {
		ts0[i] = c.tinfo
	}
	pick := errorType(ts0)
	c := g.types[pick]
	rec := samples[pick*SamplesPerType]
	want, err := kieker.NewEncoder(kieker.EncoderOptions{Inline: true}).Append(nil, &rec)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, c.rt.Name, err)
	}
	wantKDB, err := kdb.AppendBinary(nil, c.id, &rec)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, c.rt.Name, err)
	}
	p, pu := g.p, g.pu
	ts := cConst(record.Long, record.IntValue(rec.LoggingTimestamp))
	w.p("\t/* Error paths: a record is written whole or not at all. */")
	w.p("\t{")
	w.p("\t\tstatic const unsigned char want_kieker[] = %s;", cBytes(want))
	w.p("\t\tstatic unsigned char mem[%d];", max(len(want), len(wantKDB)))
	w.p("\t\t%s_buf fb;", p)
	w.p("\t\t%s_registry freg;", p)
	w.p("\t\t%s r;", c.name)
	w.p("\t\tint err;")
	g.sampleRecord(w, c, &rec)
	w.p("\t\t%s_registry_init(&freg);", p)
	w.p("\t\t%s_buf_init_fixed(&fb, mem, %d);", p, len(want)-1)
	w.p("\t\terr = %s_append_kieker(&fb, &freg, %s, &r);", c.name, ts)
	w.p("\t\texpect(err == %s_ENOSPC && fb.len == 0 && %s_registry_len(&freg) == 0, \"Kieker into a fixed buffer one byte short\");", pu, p)
	w.p("\t\t%s_buf_init_fixed(&fb, mem, %d);", p, len(want))
	w.p("\t\tcheck(\"after ENOSPC\", \"Kieker\", %s_append_kieker(&fb, &freg, %s, &r), &fb, 0, want_kieker, sizeof want_kieker);", c.name, ts)
	w.p("\t\t%s_buf_init_fixed(&fb, mem, %d);", p, len(wantKDB)-1)
	w.p("\t\texpect(%s_append_kdb(&fb, %d, &r) == %s_ENOSPC && fb.len == 0, \"KDB into a fixed buffer one byte short\");", c.name, c.id, pu)
	w.p("\t\t%s_buf_init_fixed(&fb, mem, sizeof mem);", p)
	w.p("\t\texpect(%s_append_kdb(NULL, 1, &r) == %s_EINVAL && %s_append_kieker(&fb, NULL, 0, &r) == %s_EINVAL, \"NULL arguments\");", c.name, pu, c.name, pu)
	doneArray, doneString := false, false
	for j, f := range c.tinfo.fields {
		m := "r." + c.members[j]
		switch {
		case f.array && !doneArray:
			doneArray = true
			w.p("\t\t%s.items = NULL;", m)
			w.p("\t\t%s.count = 1;", m)
			w.p("\t\texpect(%s_append_kdb(&fb, 1, &r) == %s_EINVAL && fb.len == 0, \"KDB array without items\");", c.name, pu)
			w.p("\t\texpect(%s_append_kieker(&fb, &freg, 0, &r) == %s_EINVAL && fb.len == 0, \"Kieker array without items\");", c.name, pu)
			w.p("\t\t%s.count = 0;", m)
		case f.kind == record.String && !f.array && !doneString:
			doneString = true
			w.p("\t\t%s = \"\\377 invalid\";", m)
			w.p("\t\texpect(%s_append_kdb(&fb, 1, &r) == %s_EUTF8 && fb.len == 0, \"KDB invalid UTF-8\");", c.name, pu)
			w.p("\t\texpect(%s_append_kieker(&fb, &freg, 0, &r) == %s_EUTF8 && fb.len == 0 && %s_registry_len(&freg) == %d, \"Kieker invalid UTF-8\");", c.name, pu, p, kiekerStrings(&rec))
			w.p("\t\t%s = NULL;", m)
		}
	}
	w.p("\t\t%s_registry_free(&freg);", p)
	w.p("\t}")
	return nil
}

// kiekerStrings is the number of distinct strings a record registers.
func kiekerStrings(r *record.Record) int {
	seen := map[string]bool{r.Type.Name: true}
	for i, f := range r.Type.Fields {
		if f.Kind != record.String {
			continue
		}
		if !f.Array {
			seen[r.Values[i].Str()] = true
			continue
		}
		for _, it := range r.Values[i].List().Items {
			seen[it.Str()] = true
		}
	}
	return len(seen)
}

// cBytes renders bytes as a C array initializer.
func cBytes(b []byte) string {
	var s strings.Builder
	s.WriteByte('{')
	for i, c := range b {
		if i > 0 {
			s.WriteByte(',')
		}
		fmt.Fprintf(&s, "%d", c)
	}
	s.WriteByte('}')
	return s.String()
}
