package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
)

// foldedTops sums folded stacks per top frame: the leaf frame without its
// parameters ("java.io.FileInputStream.readBytes"), or the label drawn
// above the stack as is ("java.lang.IllegalStateException").
func foldedTops(t *testing.T, folded string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(folded), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("folded line %q", line)
		}
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("folded line %q", line)
		}
		stack := line[:i]
		leaf := stack[strings.LastIndexByte(stack, ';')+1:]
		if j := strings.IndexByte(leaf, '('); j >= 0 {
			leaf = leaf[:j]
		}
		out[leaf] += n
	}
	return out
}

// TestAnalyzeFlameKinds: for every kind of flame graph, the folded stacks
// of analyze --flame --kind K weigh, per top frame, exactly what jfr print
// --json of the same recording sums: allocation sample weights in bytes
// (the class allocated on top), monitor and park waits in ns (the
// monitor's class on top), file and socket I/O by time and by bytes,
// exceptions and errors thrown (the class on top). The recording is the
// workload's with the profile settings, exceptions and every file and
// socket operation, in 1 MB chunks.
func TestAnalyzeFlameKinds(t *testing.T) {
	tools, rec := jfrRec.Get(t)
	must := map[string][]string{ // top frames each kind must show
		"alloc":      {"byte[]", "long[]"},
		"lock":       {"java.lang.Object"},
		"io":         {"java.io.FileInputStream.read", "java.net.Socket$SocketInputStream.read"},
		"io-bytes":   {"java.io.FileOutputStream.write", "java.net.Socket$SocketOutputStream.write"},
		"exceptions": {"java.lang.IllegalStateException", "java.lang.AssertionError"},
		"errors":     {"java.lang.AssertionError"},
		"cpu":        {},
	}
	for _, kind := range flame.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			var weighs []jfrtest.Weigh
			for _, e := range kind.Events {
				weighs = append(weighs, jfrtest.Weigh{Type: e.Type, Weight: e.Weight, Label: e.Label})
			}
			want, noStack, err := tools.TopWeights(context.Background(), rec, weighs)
			if err != nil {
				t.Fatal(err)
			}
			r := tb(t, "analyze", "--flame", "--kind", kind.Name, "-o", "-", rec)
			if len(want) == 0 {
				if r.code != exitData || !strings.Contains(r.stderr, "no samples") {
					t.Errorf("no events: exit %d, %s", r.code, r.stderr)
				}
				if _, required := must[kind.Name]; required {
					t.Errorf("the recording has no events of kind %s", kind.Name)
				}
				return
			}
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			got := foldedTops(t, r.stdout)
			// Events jfr print shows without a stack (they began before a
			// chunk rotation) have tracebridge's stack of the previous
			// chunk: at most their weight more under their label.
			resolved := map[string]int64{}
			for top, n := range got {
				if extra := n - want[top]; extra > 0 && extra <= noStack[top] {
					resolved[top] = extra
					got[top] = want[top]
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("weight per top frame (-jfr print +tracebridge):\n%s", diff)
			}
			if len(resolved) > 0 {
				t.Logf("stacks jfr print leaves null, by top frame: %v (of %v)", resolved, noStack)
			}
			for _, top := range must[kind.Name] {
				if got[top] <= 0 {
					t.Errorf("no %s on top; tops: %v", top, got)
				}
			}
			var total int64
			for _, n := range want {
				total += n
			}
			t.Logf("%s: %d %s over %d top frames", kind.Name, total, kind.Unit, len(want))
		})
	}
	dir := t.TempDir()
	r := ok(t, "analyze", "--flame", "--kind", "lock", "--per-thread", "-o", filepath.Join(dir, "lock"), rec)
	if !strings.Contains(r.stdout, "contender") {
		t.Errorf("no contender's lock profile among %s", r.stdout)
	}
	if r := tb(t, "analyze", "--flame", "--kind", "heap", rec); r.code != exitUsage || !strings.Contains(r.stderr, "alloc") {
		t.Errorf("unknown kind: exit %d, %s", r.code, r.stderr)
	}
	if r := tb(t, "analyze", "--flame", "--kind", "cpu", "--type", "jdk.ExecutionSample", rec); r.code != exitUsage {
		t.Errorf("--kind and --type: exit %d", r.code)
	}
}
