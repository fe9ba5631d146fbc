// Package testcorpus locates the project's shared, read-only test corpus: real
// Kieker logs, captured byte streams and Kieker's record descriptions that
// live beside the repository in ../shared (never copied into it).
//
// Tests call Dir (or Path) to find it. The corpus is found through the
// TRACEBRIDGE_SHARED environment variable, else by walking up from the
// working directory to a directory whose sibling "shared" holds FORMATS.md.
package testcorpus

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the corpus directory, failing the test when it is absent:
// the corpus is part of the project's test contract, not an optional service.
func Dir(tb testing.TB) string {
	tb.Helper()
	d, ok := Find()
	if !ok {
		tb.Fatal("shared corpus not found: set TRACEBRIDGE_SHARED or keep ../shared beside the repository")
	}
	return d
}

// Path joins elements onto the corpus directory (see Dir).
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	return filepath.Join(append([]string{Dir(tb)}, elem...)...)
}

// Read returns the contents of a corpus file (see Path), failing the test
// when it cannot be read.
func Read(tb testing.TB, elem ...string) []byte {
	tb.Helper()
	data, err := os.ReadFile(Path(tb, elem...))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// LogNames returns the names of the directories in kieker-logs, the
// corpus' Kieker logs (kieker-2.0-compressed holds one variant of a log
// per directory), in directory order.
func LogNames(tb testing.TB) []string {
	tb.Helper()
	entries, err := os.ReadDir(Path(tb, "kieker-logs"))
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// Find looks for the corpus without a test.
func Find() (string, bool) {
	if d := os.Getenv("TRACEBRIDGE_SHARED"); d != "" {
		if isCorpus(d) {
			return d, true
		}
		return "", false
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for d := wd; ; d = filepath.Dir(d) {
		if c := filepath.Join(d, "shared"); isCorpus(c) {
			return c, true
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", false
}

func isCorpus(d string) bool {
	_, err := os.Stat(filepath.Join(d, "FORMATS.md"))
	return err == nil
}
