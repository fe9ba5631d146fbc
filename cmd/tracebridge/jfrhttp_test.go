package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
)

// TestServeJFRUpload: a running JVM's recording dumped with jcmd
// JFR.dump and posted with curl to a jfr-http receiver, gzip-compressed
// under one name and as the jfr part of a multipart form under another,
// shows in the flame graph API of each name's host with exactly the
// execution samples jfr summary counts and, per top frame, the
// allocation weights jfr print sums; the Kieker log holds both uploads'
// events; something that is not JFR is answered 400 naming the reason.
// examples/jfr-push.sh (jcmd JFR.stop/JFR.start and curl in a loop)
// pushes a recording of the same JVM once.
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
	jvm, err := tools.Start(cp, jfrtest.Options{Seconds: 120, UntilFinish: true, RunID: "push"})
	if err != nil {
		t.Fatal(err)
	}
	defer jvm.Stop()
	for deadline := time.After(60 * time.Second); ; {
		var tick int
		select {
		case tick = <-jvm.Ticks():
		case <-deadline:
			t.Fatal("the workload printed no third tick within 60s")
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
	notJFR := filepath.Join(work, "notes.txt")
	os.WriteFile(notJFR, []byte("not a recording\n"), 0o644)
	out, err := exec.Command(curl, "-sS", "-o", "-", "-w", "\n%{http_code}", "--data-binary", "@"+notJFR, ingest+"&name=x").CombinedOutput()
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
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
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
			code, b := apiGet(t, "GET", base+"&kind=alloc", "", "")
			if code != 200 {
				t.Fatalf("%s alloc: %d %s", host, code, b)
			}
			compareTops(t, wantAlloc, noStack, foldedTops(t, string(b)))
		}
	}
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
