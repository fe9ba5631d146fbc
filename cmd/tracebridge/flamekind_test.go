package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
	"github.com/tracebridge/tracebridge/internal/jfrview"
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

// compareTops compares the weights per top frame of a flame graph with
// jfr print's. Events jfr print shows without a stack (they began before
// a chunk rotation) have tracebridge's stack of the previous chunk: at
// most their weight more under their label.
func compareTops(t *testing.T, want, noStack, got map[string]int64) {
	t.Helper()
	resolved := map[string]int64{}
	for top, n := range got {
		if extra := n - want[top]; extra > 0 && extra <= noStack[top] {
			resolved[top] = extra
			got[top] = want[top]
			if _, ok := want[top]; !ok { // only such events have this top
				delete(got, top)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("weight per top frame (-jfr print +tracebridge):\n%s", diff)
	}
	if len(resolved) > 0 {
		t.Logf("stacks jfr print leaves null, by top frame: %v (of %v)", resolved, noStack)
	}
}

// weighsOf is what jfrtest.TopWeights needs to know of a kind.
func weighsOf(kind *flame.Kind) []jfrtest.Weigh {
	var weighs []jfrtest.Weigh
	for _, e := range kind.Events {
		weighs = append(weighs, jfrtest.Weigh{Type: e.Type, Weight: e.Weight, Label: e.Label})
	}
	return weighs
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
			want, noStack, err := tools.TopWeights(context.Background(), rec, weighsOf(kind))
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
			compareTops(t, want, noStack, got)
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

// TestServeFlameKinds: serve with a jfr receiver reading the recording's
// chunks from a repository directory; /api/v1/profiles/flame?kind=K of
// the host answers, for every kind, the weights per top frame jfr print
// --json sums on the recording (the profile stage keeps at most 64
// frames of a stack, so the top frames are whole), with the kind's unit.
func TestServeFlameKinds(t *testing.T) {
	tools, rec := jfrRec.Get(t)
	counts, _ := summaryEvents(t, tools, rec)
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	repo := filepath.Join(work, "repo")
	os.MkdirAll(repo, 0o755)
	splitRecording(t, data, repo)
	yaml := fmt.Sprintf("flush_interval: 100ms\nreceivers:\n  - {name: jvms, type: jfr, repository: %q, host: shop-kinds, start: beginning}\nsinks:\n  - {type: kieker-log, path: logs}\n", repo)
	p := bridgetest.Start(t, work, "-c", bridgetest.WriteConfig(t, work, yaml), "--no-store", "--http", "127.0.0.1:0")
	defer p.Stop()
	base := httpURL(t, p) + "/api/v1/profiles/flame?host=shop-kinds&since=3h&format=folded"
	// Every execution sample has arrived when the cpu graph holds as many
	// as jfr summary counts; the other kinds' events came in the same
	// chunks, before the last one's end.
	deadline := time.Now().Add(90 * time.Second)
	var cpu int64
	for time.Now().Before(deadline) {
		if code, b := apiGet(t, "GET", base+"&kind=cpu", "", ""); code == 200 {
			cpu = 0
			for _, n := range foldedTops(t, string(b)) {
				cpu += n
			}
			if cpu >= counts["jdk.ExecutionSample"] {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if cpu != counts["jdk.ExecutionSample"] {
		t.Fatalf("cpu flame graph: %d samples, jfr summary %d; stderr:\n%s", cpu, counts["jdk.ExecutionSample"], p.Stderr())
	}
	for _, kind := range flame.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			want, noStack, err := tools.TopWeights(context.Background(), rec, weighsOf(kind))
			if err != nil {
				t.Fatal(err)
			}
			var wantTotal int64
			for _, n := range want {
				wantTotal += n
			}
			// The events after the last sample may still be on their way.
			code, b := apiGet(t, "GET", base+"&kind="+kind.Name, "", "")
			for deadline := time.Now().Add(30 * time.Second); len(want) > 0 && time.Now().Before(deadline); {
				var total int64
				if code == 200 {
					for _, n := range foldedTops(t, string(b)) {
						total += n
					}
				}
				if total >= wantTotal {
					break
				}
				time.Sleep(200 * time.Millisecond)
				code, b = apiGet(t, "GET", base+"&kind="+kind.Name, "", "")
			}
			if len(want) == 0 {
				if code != 404 {
					t.Errorf("no events: %d %s", code, b)
				}
				return
			}
			if code != 200 {
				t.Fatalf("%d %s", code, b)
			}
			compareTops(t, want, noStack, foldedTops(t, string(b)))
			var f struct{ Unit string }
			if code, b := apiGet(t, "GET", strings.Replace(base, "format=folded", "format=json", 1)+"&kind="+kind.Name, "", ""); code != 200 || json.Unmarshal(b, &f) != nil || f.Unit != kind.Unit {
				t.Errorf("JSON: %d, unit %q, want %q", code, f.Unit, kind.Unit)
			}
		})
	}
	if code, b := apiGet(t, "GET", base+"&kind=heap", "", ""); code != 400 {
		t.Errorf("unknown kind: %d %s", code, b)
	}
	t.Run("views", func(t *testing.T) { checkViews(t, tools, rec, httpURL(t, p), "shop-kinds", counts) })
}

// checkViews compares host's views (GC pauses and phases, heap after GC,
// contended monitors, classes allocated, exceptions, the slowest I/O)
// with jfr print --json of rec, and the number of collections, pause
// phases and monitor enters with jfr summary's counts.
func checkViews(t *testing.T, tools jfrtest.Tools, rec, base, host string, counts map[string]int64) {
	t.Helper()
	want := viewsOracle(t, tools, rec)
	url := base + "/api/v1/profiles/views?host=" + host + "&since=3h"
	var got viewSums
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, b := apiGet(t, "GET", url, "", "")
		var v jfrview.Views
		if code == 200 && json.Unmarshal(b, &v) == nil {
			got = sumViews(v)
			if cmp.Equal(want, got) || time.Now().After(deadline) {
				break
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("views: %d %.300s", code, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("views (-jfr print +tracebridge):\n%s", diff)
	}
	var monitors int64
	for _, m := range got.Monitors {
		monitors += m[0]
	}
	if got.GCs != counts["jdk.GarbageCollection"] || got.Phases != counts["jdk.GCPhasePause"] || monitors != counts["jdk.JavaMonitorEnter"] {
		t.Errorf("views: %d collections, %d pause phases, %d monitor enters; jfr summary %d, %d, %d",
			got.GCs, got.Phases, monitors, counts["jdk.GarbageCollection"], counts["jdk.GCPhasePause"], counts["jdk.JavaMonitorEnter"])
	}
	if want.GCs == 0 || want.Phases == 0 || len(want.Monitors) == 0 || len(want.Allocs) == 0 || len(want.Thrown) == 0 || want.SlowestIO == 0 {
		t.Errorf("the recording lacks events for a view: %+v", want)
	}
	t.Logf("%d GCs (%d ns of pauses, longest %d; %d pause phases, %d ns), %d heap points, %d monitor classes, %d allocated classes, %d exception classes, slowest I/O %d ns",
		want.GCs, want.GCPauseNs, want.GCLongestNs, want.Phases, want.PhaseNs, len(want.HeapUsed), len(want.Monitors), len(want.Allocs), len(want.Thrown), want.SlowestIO)
}

// viewSums are the figures of the views a test compares with jfr print.
type viewSums struct {
	GCs, GCPauseNs, GCLongestNs int64
	Phases, PhaseNs             int64               // jdk.GCPhasePause: count, total
	HeapUsed                    []int64             // after GC, in time order
	Monitors                    map[string][3]int64 // count, total, max
	Allocs                      map[string][2]int64 // samples, bytes
	Thrown                      map[string]int64
	SlowestIO                   int64
}

func sumViews(v jfrview.Views) viewSums {
	s := viewSums{GCs: v.GC.Count, GCPauseNs: v.GC.TotalPauseNs, GCLongestNs: v.GC.LongestNs, Phases: v.GC.PhaseCount, PhaseNs: v.GC.PhaseTotalNs,
		Monitors: map[string][3]int64{}, Allocs: map[string][2]int64{}, Thrown: map[string]int64{}}
	for _, h := range v.Heap {
		s.HeapUsed = append(s.HeapUsed, h.Used)
	}
	for _, m := range v.Monitors {
		s.Monitors[m.Class] = [3]int64{m.Count, m.TotalNs, m.MaxNs}
	}
	for _, a := range v.Allocations {
		s.Allocs[a.Class] = [2]int64{a.Samples, a.Bytes}
	}
	for _, e := range v.Exceptions {
		s.Thrown[e.Class] = e.Count
	}
	if len(v.SlowIO) > 0 {
		s.SlowestIO = v.SlowIO[0].DurationNs
	}
	return s
}

// viewsOracle computes the views' figures with jfr print --json.
func viewsOracle(t *testing.T, tools jfrtest.Tools, rec string) viewSums {
	t.Helper()
	s := viewSums{Monitors: map[string][3]int64{}, Allocs: map[string][2]int64{}, Thrown: map[string]int64{}}
	type heapPoint struct {
		time string
		used int64
	}
	var heap []heapPoint
	num := func(x any) int64 {
		switch v := x.(type) {
		case json.Number:
			n, _ := v.Int64()
			return n
		case string:
			n, err := jfrtest.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		return 0
	}
	class := func(x any) string {
		c, _ := x.(map[string]any)
		name, _ := c["name"].(string)
		return flame.JavaClassName(strings.ReplaceAll(name, "/", "."))
	}
	err := tools.PrintJSON(context.Background(), rec, []string{"jdk.GarbageCollection", "jdk.GCHeapSummary", "jdk.JavaMonitorEnter",
		"jdk.ObjectAllocationSample", "jdk.JavaExceptionThrow", "jdk.FileRead", "jdk.FileWrite", "jdk.SocketRead", "jdk.SocketWrite", "jdk.GCPhasePause"}, func(ev jfrtest.Event) error {
		v := ev.Values
		switch ev.Type {
		case "jdk.GarbageCollection":
			s.GCs++
			s.GCPauseNs += num(v["sumOfPauses"])
			s.GCLongestNs = max(s.GCLongestNs, num(v["longestPause"]))
		case "jdk.GCPhasePause":
			s.Phases++
			s.PhaseNs += num(v["duration"])
		case "jdk.GCHeapSummary":
			if v["when"] == "After GC" {
				st, _ := v["startTime"].(string)
				heap = append(heap, heapPoint{st, num(v["heapUsed"])})
			}
		case "jdk.JavaMonitorEnter":
			c := class(v["monitorClass"])
			m := s.Monitors[c]
			d := num(v["duration"])
			s.Monitors[c] = [3]int64{m[0] + 1, m[1] + d, max(m[2], d)}
		case "jdk.ObjectAllocationSample":
			c := class(v["objectClass"])
			a := s.Allocs[c]
			s.Allocs[c] = [2]int64{a[0] + 1, a[1] + num(v["weight"])}
		case "jdk.JavaExceptionThrow":
			s.Thrown[class(v["thrownClass"])]++
		default:
			s.SlowestIO = max(s.SlowestIO, num(v["duration"]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// jfr print sorts each chunk's events by their end; the heap points
	// go by their time (RFC 3339 text of one offset sorts as time).
	slices.SortStableFunc(heap, func(a, b heapPoint) int { return strings.Compare(a.time, b.time) })
	for _, h := range heap {
		s.HeapUsed = append(s.HeapUsed, h.used)
	}
	return s
}
