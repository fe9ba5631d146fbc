package eql

import (
	goparser "go/parser"
	gotoken "go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package self-contained: the standard library and
// the trace model only.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := goparser.ParseFile(gotoken.NewFileSet(), f, nil, goparser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range af.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			if p != "github.com/tracebridge/tracebridge/internal/trace" && strings.Contains(first, ".") {
				t.Errorf("%s imports %s: eql imports only the standard library and internal/trace", f, p)
			}
		}
	}
}
