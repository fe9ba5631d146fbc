package gen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// FuzzGenerate feeds arbitrary IRL to the generator: whatever IRL loads
// must generate in every language without a panic (an error only for
// names that clash), Go output must be valid Go (Generate formats it),
// and C output must keep comments and string literals closed.
func FuzzGenerate(f *testing.F) {
	for _, name := range []string{"small.irl", "allkinds.irl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, dir := range []string{testcorpus.Path(f, "kieker-irl", "common"), testcorpus.Path(f, "kieker-irl", "tools")} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".irl") {
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				f.Add(string(b))
			}
			return err
		})
		if err != nil {
			f.Fatal(err)
		}
	}
	f.Add("package p\n/** doc */ entity E { const string X = \"*/ /* ??= \\n\" string s = X string[] a = { \"x\", \"y\" } char c = 'x' float f = 1e38 }")
	f.Add("package p\nentity A { int a }\nentity B { long b }\n@x '*/' entity E extends A { double ^entity = 1 }")
	f.Fuzz(func(t *testing.T, src string) {
		path := filepath.Join(t.TempDir(), "f.irl")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := irl.Config{MaxFileSize: 1 << 16}.Load(path)
		if err != nil {
			return
		}
		cat := record.NewCatalog()
		if _, err := m.AddTo(cat); err != nil {
			return
		}
		var types []Type
		for _, d := range m.Decls() {
			if d.IsRecord() {
				types = append(types, Type{Record: cat.Lookup(d.FullName()), Decl: d, Model: m})
			}
		}
		if len(types) == 0 {
			return
		}
		for _, lang := range Langs() {
			// The test program only for C: it adds the samples and their
			// encoding, and C is the cheapest to check.
			files, err := Generate(types, Options{Lang: lang, Tests: lang == C, Command: "tracebridge gen */ /*"})
			if errors.Is(err, ErrInvalid) && strings.Contains(err.Error(), "both become") {
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", lang, err)
			}
			if lang != C {
				continue
			}
			for _, f := range files {
				if strings.HasSuffix(f.Name, ".map") {
					continue
				}
				if err := cLex(string(f.Data)); err != nil {
					t.Fatalf("%s: %v", f.Name, err)
				}
			}
		}
	})
}

// cLex checks that C source keeps its comments and string and character
// literals well formed: no comment opened inside a comment (gcc -Wcomment),
// no stray end of comment, literals closed on their line, no trigraph in
// a literal.
func cLex(src string) error {
	const (
		code = iota
		comment
		str
		char
	)
	state, line := code, 1
	for i := 0; i < len(src); i++ {
		c := src[i]
		next := byte(0)
		if i+1 < len(src) {
			next = src[i+1]
		}
		if c == '\n' {
			if state == str || state == char {
				return fmt.Errorf("line %d: literal not closed", line)
			}
			line++
			continue
		}
		switch state {
		case code:
			switch {
			case c == '/' && next == '*':
				state = comment
				i++
			case c == '*' && next == '/':
				return fmt.Errorf("line %d: */ outside a comment", line)
			case c == '"':
				state = str
			case c == '\'':
				state = char
			}
		case comment:
			switch {
			case c == '/' && next == '*':
				return fmt.Errorf("line %d: /* inside a comment", line)
			case c == '*' && next == '/':
				state = code
				i++
			}
		case str, char:
			switch {
			case c == '\\':
				i++
			case c == '?' && next == '?':
				return fmt.Errorf("line %d: trigraph in a literal", line)
			case c == '"' && state == str, c == '\'' && state == char:
				state = code
			}
		}
	}
	if state != code {
		return fmt.Errorf("end of file inside a comment or literal")
	}
	return nil
}

func TestCLex(t *testing.T) {
	for src, ok := range map[string]bool{
		"int a; /* x */ char *s = \"a\\\"b\";": true,
		"/* a /* b */":                         false,
		"int a; */":                            false,
		"char *s = \"a\nb\";":                  false,
		"char *s = \"??=\";":                   false,
		"char *s = \"\\?\\?=\";":               true,
	} {
		if err := cLex(src); (err == nil) != ok {
			t.Errorf("cLex(%q) = %v", src, err)
		}
	}
}
