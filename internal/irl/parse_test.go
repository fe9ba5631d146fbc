package irl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// ignorePos compares syntax trees without their positions.
var ignorePos = cmpopts.IgnoreTypes(Pos{})

// corpusFiles returns the shared IRL files in lexical order.
func corpusFiles(tb testing.TB) []string {
	tb.Helper()
	var files []string
	root := testcorpus.Path(tb, "kieker-irl")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".irl") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) != 17 {
		tb.Fatalf("found %d IRL files in %s, want 17", len(files), root)
	}
	return files
}

// parseFile parses the IRL file name.
func parseFile(tb testing.TB, name string) *File {
	tb.Helper()
	src, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := Parse(name, src)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want *File
	}{
		{
			name: "package and imports",
			src:  "package a.b.c\nimport x.y.Z\nimport x.y.*\n",
			want: &File{Name: "t.irl", Package: "a.b.c", Imports: []Import{{Path: "x.y.Z"}, {Path: "x.y", Wildcard: true}}},
		},
		{
			name: "declarations without bodies",
			src: `package p
@author 'Jan' @since "1.5"
abstract entity A : T1, q.T2
/** doc of E */
event E extends A
template T1
template T2: T1{}`,
			want: &File{Name: "t.irl", Package: "p", Decls: []*Decl{
				{Kind: Entity, Abstract: true, Name: "A", Package: "p", Templates: []Ref{{Name: "T1"}, {Name: "q.T2"}},
					Annotations: []Annotation{{Name: "author", Value: "Jan"}, {Name: "since", Value: "1.5"}}},
				{Kind: Event, Name: "E", Package: "p", Parent: &Ref{Name: "A"}, Doc: "doc of E"},
				{Kind: Template, Name: "T1", Package: "p"},
				{Kind: Template, Name: "T2", Package: "p", Templates: []Ref{{Name: "T1"}}},
			}},
		},
		{
			name: "body items",
			src: `package p
entity R {
	const string NONE = "<none>" // a constant
	const long NO_ID = -1
	/** the id */
	changeable grouped by Meta.id id = NO_ID
	alias id as otherId
	transient auto-increment int next = 0
	string s = NONE
	string[] list
	int[3] triple
	double d = 0.0
	float f = -1.5e3f
	boolean b = true
	char c = 'x'
	String version = KIEKER_VERSION
	long t : timestamp = 0
}`,
			want: &File{Name: "t.irl", Package: "p", Decls: []*Decl{{
				Kind: Entity, Name: "R", Package: "p",
				Constants: []*Const{
					{Name: "NONE", Type: TypeRef{Name: "string", Kind: record.String}, Value: &Literal{Kind: LitString, Text: `"<none>"`, Str: "<none>"}},
					{Name: "NO_ID", Type: TypeRef{Name: "long", Kind: record.Long}, Value: &Literal{Kind: LitInt, Text: "-1", Int: -1}},
				},
				Aliases: []*Alias{{Field: "id", Name: "otherId"}},
				Fields: []*FieldDecl{
					{Name: "id", GroupedBy: &FieldRef{Decl: Ref{Name: "Meta"}, Field: "id"}, Modifiers: []string{"changeable"},
						Default: &Literal{Kind: LitIdent, Text: "NO_ID", Str: "NO_ID"}, Doc: "the id"},
					{Name: "next", Type: TypeRef{Name: "int", Kind: record.Int}, Modifiers: []string{"transient", "auto-increment"},
						Default: &Literal{Kind: LitInt, Text: "0"}},
					{Name: "s", Type: TypeRef{Name: "string", Kind: record.String}, Default: &Literal{Kind: LitIdent, Text: "NONE", Str: "NONE"}},
					{Name: "list", Type: TypeRef{Name: "string", Kind: record.String, Dims: []int{0}}},
					{Name: "triple", Type: TypeRef{Name: "int", Kind: record.Int, Dims: []int{3}}},
					{Name: "d", Type: TypeRef{Name: "double", Kind: record.Double}, Default: &Literal{Kind: LitFloat, Text: "0.0"}},
					{Name: "f", Type: TypeRef{Name: "float", Kind: record.Float}, Default: &Literal{Kind: LitFloat, Text: "-1.5e3f", Float: -1500}},
					{Name: "b", Type: TypeRef{Name: "boolean", Kind: record.Bool}, Default: &Literal{Kind: LitBool, Text: "true", Bool: true}},
					{Name: "c", Type: TypeRef{Name: "char", Kind: record.Char}, Default: &Literal{Kind: LitString, Text: "'x'", Str: "x"}},
					{Name: "version", Type: TypeRef{Name: "String", Kind: record.String}, Default: &Literal{Kind: LitIdent, Text: "KIEKER_VERSION", Str: "KIEKER_VERSION"}},
					{Name: "t", Type: TypeRef{Name: "long", Kind: record.Long}, Semantics: "timestamp", Default: &Literal{Kind: LitInt, Text: "0"}},
				},
			}}},
		},
		{
			name: "strings, escapes, array literal, escaped keyword",
			src:  "package p\nentity R {\n\tstring s = 'it\\'s \\u0041\\n'\n\tint[] a = {1, { 2 }, -3}\n\tlong ^event\n}",
			want: &File{Name: "t.irl", Package: "p", Decls: []*Decl{{Kind: Entity, Name: "R", Package: "p", Fields: []*FieldDecl{
				{Name: "s", Type: TypeRef{Name: "string", Kind: record.String}, Default: &Literal{Kind: LitString, Text: `'it\'s \u0041\n'`, Str: "it's A\n"}},
				{Name: "a", Type: TypeRef{Name: "int", Kind: record.Int, Dims: []int{0}}, Default: &Literal{Kind: LitArray, Text: "{1, { 2 }, -3}", Elems: []Literal{
					{Kind: LitInt, Text: "1", Int: 1},
					{Kind: LitArray, Text: "{ 2 }", Elems: []Literal{{Kind: LitInt, Text: "2", Int: 2}}},
					{Kind: LitInt, Text: "-3", Int: -3},
				}}},
				{Name: "event", Type: TypeRef{Name: "long", Kind: record.Long}},
			}}}},
		},
		{
			name: "comments everywhere and CRLF",
			src:  "/* head */ package /* x */ p // y\r\n@author /* between */ 'a'\r\n/* c */ @since 'b' entity /** late doc */ E /* d */ { /* e */ }\r\n// end",
			want: &File{Name: "t.irl", Package: "p", Decls: []*Decl{{Kind: Entity, Name: "E", Package: "p",
				Annotations: []Annotation{{Name: "author", Value: "a"}, {Name: "since", Value: "b"}}}}},
		},
		{
			name: "doc between annotations",
			src:  "package p\n@author 'a'\n/**\n * Line one.\n *   indented\n */\n@since 'b'\nentity E",
			want: &File{Name: "t.irl", Package: "p", Decls: []*Decl{{Kind: Entity, Name: "E", Package: "p", Doc: "Line one.\n  indented",
				Annotations: []Annotation{{Name: "author", Value: "a"}, {Name: "since", Value: "b"}}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("t.irl", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, ignorePos); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePositions(t *testing.T) {
	src := "package p\n\n/* c\n */ entity E {\n\tlong  x = 'a\nb'\n\tint y\n}\n"
	f, err := Parse("t.irl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	d := f.Decls[0]
	got := []string{d.Pos.String(), d.Fields[0].Pos.String(), d.Fields[0].Type.Pos.String(), d.Fields[0].Default.Pos.String(), d.Fields[1].Pos.String()}
	want := []string{"t.irl:4:12", "t.irl:5:8", "t.irl:5:2", "t.irl:5:12", "t.irl:7:6"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("positions (-want +got):\n%s", diff)
	}
	if d.Pos.Offset != strings.Index(src, "E {") {
		t.Errorf("offset %d, want %d", d.Pos.Offset, strings.Index(src, "E {"))
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"unterminated comment", "package p\nentity E /* never\nclosed", "t.irl:2:10: unterminated comment"},
		{"unterminated doc comment", "package p\n/** doc", "t.irl:2:1: unterminated comment"},
		{"unterminated string", "package p\n@author 'x\nentity E", "t.irl:2:9: unterminated string"},
		{"unterminated string after escape", "package p\n@author 'x\\", "t.irl:2:9: unterminated string"},
		{"bad unicode escape", "package p\n@author 'x\\u12g4'", "t.irl:2:11: invalid unicode escape in string"},
		{"unknown type", "package p\nentity E {\n\tInteger count\n}", `t.irl:3:2: unknown type "Integer"`},
		{"unknown type in constant", "package p\nentity E {\n\tconst foo X = 1\n}", `t.irl:3:8: unknown type "foo"`},
		{"missing entity name", "package p\nentity {\n}", "t.irl:2:8: missing entity name: found '{'"},
		{"missing field name", "package p\nentity E {\n\tlong\n}", "t.irl:4:1: missing field name: found '}'"},
		{"keyword as field name", "package p\nentity E {\n\tlong string\n}", "t.irl:3:7: missing field name: found keyword string"},
		{"missing package", "entity E", "t.irl:1:1: missing package declaration: found entity"},
		{"empty file", "", "t.irl:1:1: missing package declaration: found end of file"},
		{"second package", "package p\npackage q", "t.irl:2:1: second package declaration (the file's package is p)"},
		{"garbage character", "package p\nentity E {\n\tlong x;\n}", "t.irl:3:8: unexpected character ';'"},
		{"garbage token", "package p\nentity E }", "t.irl:2:10: expected entity, event or template, found '}'"},
		{"garbage in body", "package p\nentity E {\n\t42\n}", "t.irl:3:2: expected a type, found 42"},
		{"invalid byte", "package p\n\xff", "t.irl:2:1: unexpected byte 0xff"},
		{"non-ASCII identifier", "package p\nentity Ä", "t.irl:2:8: unexpected character 'Ä'"},
		{"missing closing brace", "package p\nentity E {\n\tlong x\n", "t.irl:2:10: entity E: missing '}' for this '{'"},
		{"template extends", "package p\ntemplate T extends U", "t.irl:2:12: template T: a template cannot extend; list parent templates after ':'"},
		{"abstract template", "package p\nabstract template T", "t.irl:2:10: a template cannot be abstract"},
		{"annotation without value", "package p\n@author entity E", "t.irl:2:9: annotation @author needs a string value, found entity"},
		{"lone at", "package p\n@ 'x'", "t.irl:2:1: '@' must be followed by an annotation name"},
		{"bad number", "package p\nentity E {\n\tint x = 12ab\n}", `t.irl:3:10: invalid number "12a"`},
		{"integer overflow", "package p\nentity E {\n\tlong x = 99999999999999999999\n}", "t.irl:3:11: integer 99999999999999999999 out of range"},
		{"missing default", "package p\nentity E {\n\tint x =\n}", "t.irl:4:1: expected a value, found '}'"},
		{"constant without value", "package p\nentity E {\n\tconst int X\n}", "t.irl:4:1: expected '=' after constant X, found '}'"},
		{"alias without as", "package p\ntemplate T {\n\talias a b\n}", "t.irl:3:10: expected 'as' after alias a, found b"},
		{"grouped without by", "package p\ntemplate T {\n\tgrouped T.x y\n}", "t.irl:3:10: expected 'by' after 'grouped', found T"},
		{"grouped by without field", "package p\ntemplate T {\n\tgrouped by T y\n}", "t.irl:3:13: grouped by T: expected Type.field"},
		{"unclosed array size", "package p\nentity E {\n\tint[3 x\n}", "t.irl:3:8: expected ']' to close the array size, found x"},
		{"zero array size", "package p\nentity E {\n\tint[0] x\n}", "t.irl:3:6: invalid array size 0"},
		{"unclosed array literal", "package p\nentity E {\n\tint[] x = {1, 2\n}", "t.irl:2:10: entity E: missing '}' for this '{'"},
		{"hyphenated name", "package p\nentity auto-x", `t.irl:2:8: invalid entity name "auto-x"`},
		{"unterminated backquote", "package p\nentity `E", "t.irl:2:8: unterminated name in backquotes"},
		{"backquote across lines", "package p\nentity `E\n`", "t.irl:2:8: unterminated name in backquotes"},
		{"empty backquotes", "package p\nentity ``", "t.irl:2:8: empty name in backquotes"},
		{"dot in backquotes of a dotted name", "package p\nimport `a.b`.C", "t.irl:2:8: invalid import name: `a.b` in backquotes holds a '.', which separates the parts of a dotted name"},
		{"backquoted type", "package p\nentity E {\n\t`long` x\n}", `t.irl:3:2: unknown type "long"`},
		{"incomplete import", "package p\nimport a.", "t.irl:2:10: missing import name: found end of file"},
		{"nesting limit", "package p\nentity E {\n\tint[] x = " + strings.Repeat("{", 40) + "1" + strings.Repeat("}", 40) + "\n}", "t.irl:3:44: array literal nested deeper than the limit 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("t.irl", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			if _, ok := err.(*Error); !ok {
				t.Errorf("error %T is not an *Error", err)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
		})
	}
}

func TestParseFileSizeLimit(t *testing.T) {
	_, err := Config{MaxFileSize: 10}.Parse("big.irl", []byte("package abcdefgh"))
	if err == nil || err.Error() != "big.irl:1:1: file size 16 over the limit 10" {
		t.Errorf("error %v", err)
	}
}

// TestFormatRoundTrip formats every corpus file and parses the result
// again: the syntax trees must agree except for positions.
func TestFormatRoundTrip(t *testing.T) {
	for _, name := range corpusFiles(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			f := parseFile(t, name)
			out := Format(f)
			g, err := Parse(name, out)
			if err != nil {
				t.Fatalf("reparse: %v\n%s", err, out)
			}
			if diff := cmp.Diff(f, g, ignorePos); diff != "" {
				t.Errorf("round trip mismatch (-parsed +reparsed):\n%s", diff)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	src := "package p.^event\nimport a.*\n/** Doc */ @author 'it\\'s'\nabstract entity ^entity extends X : T1, T2 {\n\tint x = 1 long y\n\talias x as z const int C = 2 /** f */ transient grouped by X.y ^const : sem\n}\ntemplate T1 template T2"
	f, err := Parse("t.irl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := `package p.^event

import a.*

/**
 * Doc
 */
@author 'it\'s'
abstract entity ^entity extends X : T1, T2 {
	const int C = 2
	alias x as z
	int x = 1
	long y
	/**
	 * f
	 */
	transient grouped by X.y ^const : sem
}

template T1

template T2
`
	if diff := cmp.Diff(want, string(Format(f))); diff != "" {
		t.Errorf("Format (-want +got):\n%s", diff)
	}
}
