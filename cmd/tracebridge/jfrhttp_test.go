package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/url"
	"os"
	"os/exec"
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
)

// TestServeJFRUpload: a running JVM's recording dumped with jcmd
// JFR.dump and posted with curl to a jfr-http receiver, gzip-compressed
// under one name and as the jfr part of a multipart form under another,
// shows in the flame graph API of each name's host with exactly the
// execution samples jfr summary counts and, per top frame, the
// allocation weights jfr print sums; the views (GC, heap, monitors, …)
// with what jfr print and jfr summary give; in the event browser's API and in
// the web UI's (Chromium; the subtest skips without it); the Kieker log
// holds both uploads' events; something that is not JFR is answered 400
// naming the reason. Before the dump, examples/jfr-push.sh (jcmd
// JFR.stop/JFR.start and curl in a loop) pushes a recording of the same
// JVM once, and examples/jfr-dump.sh (jcmd JFR.dump and curl) its
// recording twice under a third name; the dump posted under that name
// too leaves it with each event of the dump once.
func TestServeJFRUpload(t *testing.T) {
	tools := jfrtest.Require(t)
	jcmd, err := exec.LookPath(filepath.Join(filepath.Dir(tools.Java), "jcmd"))
	if err != nil {
		t.Skipf("jcmd: %v", err)
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skipf("curl: %v", err)
	}
	cp, err := tools.Compile()
	if err != nil {
		t.Fatal(err)
	}
	jvm, err := tools.Start(cp, jfrtest.Options{Seconds: 900, UntilFinish: true, RunID: "push"})
	if err != nil {
		t.Fatal(err)
	}
	defer jvm.Stop()
	for deadline := time.After(180 * time.Second); ; {
		var tick int
		select {
		case tick = <-jvm.Ticks():
		case <-deadline:
			t.Fatal("the workload printed no third tick within 180s")
		}
		if tick >= 3 {
			break
		}
	}
	work := t.TempDir()
	yaml := "flush_interval: 100ms\nreceivers:\n  - {name: push, type: jfr-http, listen: \"127.0.0.1:0\"}\nsinks:\n  - {type: kieker-log, path: logs}\n"
	p := bridgetest.Start(t, work, "-c", bridgetest.WriteConfig(t, work, yaml), "--no-store", "--http", "127.0.0.1:0")
	defer p.Stop()
	ingest := "http://" + p.Addr("push") + "/ingest?format=jfr"
	// examples/jfr-push.sh, once: its own recording of two seconds.
	script := exec.Command("sh", filepath.Join("..", "..", "examples", "jfr-push.sh"))
	script.Env = append(os.Environ(), "PID="+strconv.Itoa(jvm.Cmd.Process.Pid), "NAME=push-script", "INTERVAL=2", "COUNT=1",
		"TRACEBRIDGE=http://"+p.Addr("push"), "PATH="+filepath.Dir(jcmd)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := script.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "jfr-push: {") || strings.Contains(string(out), `"events":0,`) {
		t.Errorf("examples/jfr-push.sh: %v\n%s", err, out)
	}
	// examples/jfr-dump.sh, twice: the JVM's own recording dumped with
	// jcmd JFR.dump and posted with curl (the second dump from the
	// first's time on: it repeats a chunk, which the receiver skips).
	script = exec.Command("sh", filepath.Join("..", "..", "examples", "jfr-dump.sh"))
	script.Env = append(os.Environ(), "PID="+strconv.Itoa(jvm.Cmd.Process.Pid), "NAME=push-dump", "INTERVAL=1", "COUNT=2",
		"TRACEBRIDGE=http://"+p.Addr("push"), "PATH="+filepath.Dir(jcmd)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := script.CombinedOutput(); err != nil || strings.Count(string(out), "jfr-dump: {") != 2 || strings.Contains(string(out), `"events":0,`) {
		t.Errorf("examples/jfr-dump.sh: %v\n%s", err, out)
	}
	// The dump after the script: its jcmd commands ran in the JVM's
	// Attach Listener thread, whose allocation samples have a stack trace
	// without frames (java.lang.Class, java.lang.String, …): they weigh
	// in the alloc graph under their class alone, as jfr print has them.
	dump := filepath.Join(work, "dump.jfr")
	if out, err := exec.Command(jcmd, strconv.Itoa(jvm.Cmd.Process.Pid), "JFR.dump", "filename="+dump).CombinedOutput(); err != nil {
		t.Fatalf("jcmd JFR.dump: %v\n%s", err, out)
	}
	jvm.Finish()
	want, chunks := summaryEvents(t, tools, dump)
	if want["jdk.ExecutionSample"] == 0 {
		t.Fatalf("the dump holds no execution samples: %v", want)
	}
	gz := dump + ".gz"
	gzipFile(t, dump, gz)

	now := time.Now().Unix()
	span := fmt.Sprintf("&from=%d&until=%d", now-10, now)
	for _, c := range []struct {
		host string
		args []string
	}{
		{"push-gzip", []string{"-H", "Content-Encoding: gzip", "-H", "Content-Type: application/octet-stream", "--data-binary", "@" + gz}},
		{"push-form", []string{"-F", "jfr=@" + dump}},
	} {
		args := append([]string{"-sS", "--fail-with-body", "-X", "POST"}, c.args...)
		out, err := exec.Command(curl, append(args, ingest+"&name="+c.host+span)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", c.host, err, out)
		}
		var a struct{ Chunks, Events int64 }
		if err := json.Unmarshal(out, &a); err != nil || a.Chunks != int64(chunks) || a.Events != sumCounts(want) {
			t.Errorf("%s: answer %s (%v), want %d chunks and %d events", c.host, out, err, chunks, sumCounts(want))
		}
	}
	// The dump again, to the script's host: the chunks the script sent
	// are skipped, the rest is new; then that host has every event of
	// the dump once.
	out, err := exec.Command(curl, "-sS", "--fail-with-body", "-F", "jfr=@"+dump, ingest+"&name=push-dump").CombinedOutput()
	var again struct{ Chunks, Duplicates int }
	if err != nil || json.Unmarshal(out, &again) != nil || again.Chunks != chunks || again.Duplicates == 0 {
		t.Errorf("the dump after examples/jfr-dump.sh: %v %s", err, out)
	}
	waitTypeCounts(t, httpURL(t, p), "push-dump", want)
	notJFR := filepath.Join(work, "notes.txt")
	os.WriteFile(notJFR, []byte("not a recording\n"), 0o644)
	out, err = exec.Command(curl, "-sS", "-o", "-", "-w", "\n%{http_code}", "--data-binary", "@"+notJFR, ingest+"&name=x").CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "\n400") || !strings.Contains(string(out), "not a JFR recording") {
		t.Errorf("not JFR: %v %s", err, out)
	}

	allocKind, err := flame.KindOf("alloc")
	if err != nil {
		t.Fatal(err)
	}
	wantAlloc, noStack, err := tools.TopWeights(context.Background(), dump, weighsOf(allocKind))
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"push-gzip", "push-form"} {
		base := httpURL(t, p) + "/api/v1/profiles/flame?host=" + host + "&since=3h&format=folded"
		var cpu int64
		for deadline := time.Now().Add(180 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			cpu = 0
			if code, b := apiGet(t, "GET", base+"&kind=cpu", "", ""); code == 200 {
				for _, n := range foldedTops(t, string(b)) {
					cpu += n
				}
			}
			if cpu >= want["jdk.ExecutionSample"] {
				break
			}
		}
		if cpu != want["jdk.ExecutionSample"] {
			t.Fatalf("%s: cpu flame graph of %d samples, jfr summary %d; stderr:\n%s", host, cpu, want["jdk.ExecutionSample"], p.Stderr())
		}
		if len(wantAlloc) > 0 {
			// The events after the last sample may still be on their way.
			var code int
			var b []byte
			for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if code, b = apiGet(t, "GET", base+"&kind=alloc", "", ""); code == 200 && topsMatch(wantAlloc, noStack, foldedTops(t, string(b))) {
					break
				}
			}
			if code != 200 {
				t.Fatalf("%s alloc: %d %s", host, code, b)
			}
			compareTops(t, wantAlloc, noStack, foldedTops(t, string(b)))
		}
	}
	checkEventBrowser(t, p, "push-gzip", want)
	t.Run("views", func(t *testing.T) { checkViews(t, tools, dump, httpURL(t, p), "push-gzip", want) })
	t.Run("browser", func(t *testing.T) { checkWebJFREvents(t, p, "push-form", sumCounts(want)) })
	if code, b := apiGet(t, "GET", httpURL(t, p)+"/api/v1/profiles/flame?host=push-script&since=3h&format=folded&kind=cpu", "", ""); code != 200 || len(foldedTops(t, string(b))) == 0 {
		t.Errorf("the script's upload: cpu flame graph %d %.200s", code, b)
	}
	p.Stop()
	got := fullCounts(t, ok(t, "cat", "--json", p.LogDir).stdout)
	for name, n := range want {
		if got[name] < 2*n {
			t.Errorf("Kieker log: %d %s, want at least twice jfr summary's %d (and the script's)", got[name], name, n)
		}
	}
	t.Logf("%d chunks, %d events a upload, %d execution samples", chunks, sumCounts(want), want["jdk.ExecutionSample"])
}

// waitTypeCounts waits until host's event types add up to want's and
// then compares them, type by type.
func waitTypeCounts(t *testing.T, base, host string, want map[string]int64) {
	t.Helper()
	var types struct {
		Types []struct {
			Name  string
			Count int64
		}
	}
	var code int
	var b []byte
	for deadline := time.Now().Add(180 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, b = apiGet(t, "GET", base+"/api/v1/jfr/types?host="+host, "", "")
		var n int64
		if code == 200 && json.Unmarshal(b, &types) == nil {
			for _, tc := range types.Types {
				n += tc.Count
			}
		}
		if n >= sumCounts(want) || time.Now().After(deadline) {
			break
		}
	}
	got := map[string]int64{}
	for _, tc := range types.Types {
		got[tc.Name] = tc.Count
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: event counts (-jfr summary +tracebridge):\n%s", host, diff)
	}
}

// checkEventBrowser: the event browser lists every event type of host
// with jfr summary's count, its metadata's label and fields; pages of
// events hold what the window keeps; a sort, a filter and one event with
// its whole stack trace.
func checkEventBrowser(t *testing.T, bridge *bridgetest.Process, host string, want map[string]int64) {
	t.Helper()
	base := httpURL(t, bridge)
	var types struct {
		Hosts []string
		Types []struct {
			Name, Label string
			Count       int64
			Kept        int
			Fields      []struct{ Name, Kind string }
		}
	}
	code, b := apiGet(t, "GET", base+"/api/v1/jfr/types?host="+host, "", "")
	if code != 200 || json.Unmarshal(b, &types) != nil {
		t.Fatalf("types: %d %.300s", code, b)
	}
	kept := map[string]int{}
	for _, tc := range types.Types {
		if tc.Count != want[tc.Name] {
			t.Errorf("%s: count %d, jfr summary %d", tc.Name, tc.Count, want[tc.Name])
		}
		if tc.Name == "jdk.ExecutionSample" && (tc.Label != "Method Profiling Sample" || len(tc.Fields) < 3) {
			t.Errorf("%+v", tc)
		}
		kept[tc.Name] = tc.Kept
	}
	if len(types.Types) != len(want) || !slices.Contains(types.Hosts, host) {
		t.Errorf("%d types, jfr summary %d; hosts %v", len(types.Types), len(want), types.Hosts)
	}
	type page struct {
		Total  int
		Cursor string
		Type   struct{ Fields []struct{ Name string } }
		Events []struct {
			ID     int64
			Thread string
			Values []any
		}
	}
	get := func(query string) page {
		t.Helper()
		var p page
		code, b := apiGet(t, "GET", base+"/api/v1/jfr/events?host="+host+"&"+query, "", "")
		if code != 200 || json.Unmarshal(b, &p) != nil {
			t.Fatalf("events %s: %d %.300s\nthe bridge's stderr ends:\n%s", query, code, b, bridge.Stderr()[max(0, len(bridge.Stderr())-8000):])
		}
		return p
	}
	p := get("type=jdk.ExecutionSample&limit=10")
	if p.Total != kept["jdk.ExecutionSample"] || len(p.Events) != min(10, p.Total) || (p.Total > 10 && p.Cursor != "10") {
		t.Errorf("execution samples: total %d (kept %d), %d events, cursor %q", p.Total, kept["jdk.ExecutionSample"], len(p.Events), p.Cursor)
	}
	field := func(p page, name string) int {
		for i, f := range p.Type.Fields {
			if f.Name == name {
				return i
			}
		}
		t.Fatalf("no field %s", name)
		return -1
	}
	m := get("type=jdk.JavaMonitorEnter&sort=duration&order=asc&limit=1000&filter=duration%3E%3D1")
	d := field(m, "duration")
	prev := 0.0
	for _, e := range m.Events {
		v := e.Values[d].(float64)
		if v < prev || v < 1 {
			t.Fatalf("monitor enters by duration: %v after %v", v, prev)
		}
		prev = v
	}
	if len(m.Events) == 0 {
		t.Fatal("no monitor enters")
	}
	thread := m.Events[0].Thread
	byThread := get("type=jdk.JavaMonitorEnter&limit=1000&thread=" + url.QueryEscape(thread)) // a JVM thread's name has spaces ("JFR Periodic Tasks")
	for _, e := range byThread.Events {
		if e.Thread != thread {
			t.Fatalf("thread %q: an event of %q", thread, e.Thread)
		}
	}
	var one page
	code, b = apiGet(t, "GET", fmt.Sprintf("%s/api/v1/jfr/event?host=%s&id=%d", base, host, m.Events[0].ID), "", "")
	if code != 200 || json.Unmarshal(b, &one) != nil || len(one.Events) != 1 {
		t.Fatalf("event: %d %.300s", code, b)
	}
	if st := one.Events[0].Values[field(one, "stackTrace")].([]any); len(st) == 0 {
		t.Error("the event has no stack trace")
	}
	if code, _ := apiGet(t, "GET", base+"/api/v1/jfr/events?host="+host+"&type=jdk.JavaMonitorEnter&sort=nope", "", ""); code != 400 {
		t.Errorf("sort by an unknown field: %d", code)
	}
}

// topsMatch says whether compareTops would find got equal to want.
func topsMatch(want, noStack, got map[string]int64) bool {
	for top, n := range got {
		if extra := n - want[top]; extra < 0 || extra > noStack[top] {
			return false
		}
	}
	for top := range want {
		if _, ok := got[top]; !ok {
			return false
		}
	}
	return true
}

func sumCounts(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func gzipFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// multipartJFR is a multipart form like Pyroscope's agent posts: the
// recording as the jfr part.
func multipartJFR(t *testing.T, data []byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("jfr", "jfr")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}
