package flame

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// TestWriteFiles: the pair of all samples, then one pair per thread, each
// named for it in a file-safe way; ThreadOf names a sample's thread.
func TestWriteFiles(t *testing.T) {
	recs := decodeSmall(t)
	a := Aggregator{Types: []string{"jdk.ExecutionSample"}, Group: ThreadOf}
	var b record.Batch
	for i := range recs {
		b.AddRecord(&recs[i])
	}
	a.Consume(context.Background(), &b)
	prefix := filepath.Join(t.TempDir(), "out", "small")
	var written []string
	if err := a.WriteFiles(prefix, []string{"small.jfr"}, func(name string) { written = append(written, name) }); err != nil {
		t.Fatal(err)
	}
	if len(written) != 1+len(a.Profiles()) || written[0] != prefix {
		t.Fatalf("written %v for %d profiles", written, len(a.Profiles()))
	}
	for _, name := range written {
		for _, ext := range []string{".folded", ".svg"} {
			if fi, err := os.Stat(name + ext); err != nil || fi.Size() == 0 {
				t.Errorf("%s%s: %v", name, ext, err)
			}
		}
		if base := filepath.Base(name); strings.ContainsAny(base, " #/") {
			t.Errorf("file name %q is not file-safe", base)
		}
	}
	for _, p := range a.Profiles() {
		if !strings.Contains(p.Group, " #") {
			t.Errorf("thread group %q lacks the thread id", p.Group)
		}
	}
	if got := fileSafe(""); got != "none" {
		t.Errorf("fileSafe(\"\") = %q", got)
	}
}

// TestJavaClassName: array names as Class.getName() gives them read as
// Java source writes them; other names stay.
func TestJavaClassName(t *testing.T) {
	for in, want := range map[string]string{
		"[B": "byte[]", "[[I": "int[][]", "[Ljava.lang.Object;": "java.lang.Object[]",
		"[[Lshop.Order$Item;": "shop.Order$Item[][]", "java.lang.String": "java.lang.String",
		"[": "[", "[Q": "[Q", "[Lx": "[Lx", "[L;": "[L;",
	} {
		if got := JavaClassName(in); got != want {
			t.Errorf("JavaClassName(%q) = %q, want %q", in, got, want)
		}
	}
}
