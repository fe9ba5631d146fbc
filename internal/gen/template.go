package gen

import (
	"embed"
	"fmt"
	"strings"
)

// The fixed code of every language lives in templates/<lang>/ as files the
// language's own tools read: P.h, P.c and P_test.c compile with gcc, the
// Python and Perl files load (MODULE, PKG and P are the placeholders the
// generator replaces with the package name), and go/records.go builds with
// go vet go/records.go (its build tag keeps it out of this module's build).
//
// A file is cut into parts by marker lines holding "gen:part NAME" (in a
// comment of the language; the rest of the line says what the generator
// writes around the part). A part is the text after its marker up to the
// next marker; marker lines, the text before the first marker and parts
// named "-" (stand-ins that keep the file complete source) are never
// written.
//
//go:embed templates
var templateFS embed.FS

// templateParts are the parts of one template file by name.
type templateParts map[string]string

// The template files.
var (
	cHeaderTemplate  = mustTemplate("c/P.h", "prelude", "end")
	cSourceTemplate  = mustTemplate("c/P.c", "prelude")
	cTestTemplate    = mustTemplate("c/P_test.c", "prelude")
	goTemplate       = mustTemplate("go/records.go", "prelude", "registryID", "appendBool", "appendString", "checkLen")
	pyTemplate       = mustTemplate("python/MODULE.py", "prelude")
	pyTestTemplate   = mustTemplate("python/test_MODULE.py", "prelude", "mid", "main")
	perlTemplate     = mustTemplate("perl/PKG.pm", "prelude", "end")
	perlTestTemplate = mustTemplate("perl/PKG_test.pl", "prelude", "loop", "main")
)

// mustTemplate returns the parts of the embedded template file name, which
// must be exactly the parts named. The files are part of the program, so a
// missing one is a bug: it panics when the package is loaded.
func mustTemplate(name string, parts ...string) templateParts {
	data, err := templateFS.ReadFile("templates/" + name)
	if err != nil {
		panic(fmt.Sprintf("gen: template %s: %v", name, err))
	}
	t, err := splitParts(string(data))
	if err != nil {
		panic(fmt.Sprintf("gen: template %s: %v", name, err))
	}
	if len(t) != len(parts) {
		panic(fmt.Sprintf("gen: template %s has %d parts, want %d (%s)", name, len(t), len(parts), strings.Join(parts, ", ")))
	}
	for _, p := range parts {
		if _, ok := t[p]; !ok {
			panic(fmt.Sprintf("gen: template %s has no part %q", name, p))
		}
	}
	return t
}

const partMarker = "gen:part "

// splitParts cuts a template file into its parts.
func splitParts(s string) (templateParts, error) {
	t := templateParts{}
	var name string // "" before the first marker
	var b strings.Builder
	end := func() {
		if name != "" && name != "-" {
			t[name] = b.String()
		}
		b.Reset()
	}
	for line := range strings.SplitAfterSeq(s, "\n") {
		i := strings.Index(line, partMarker)
		if i < 0 {
			b.WriteString(line)
			continue
		}
		end()
		f := strings.Fields(line[i+len(partMarker):])
		if len(f) == 0 {
			return nil, fmt.Errorf("marker without a name: %q", line)
		}
		name = f[0]
		if _, dup := t[name]; dup {
			return nil, fmt.Errorf("part %q twice", name)
		}
	}
	end()
	return t, nil
}
