package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSmallRun runs the benchmark end to end at a small size: the
// binary built, traces sent and stored whole, the page opened and its
// frames measured, the table printed.
func TestSmallRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tracebridge and starts Chromium")
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		if os.Getenv("TRACEBRIDGE_REQUIRE_SERVICES") != "" {
			t.Fatal("chromium is not installed; TRACEBRIDGE_REQUIRE_SERVICES is set")
		}
		t.Skip("chromium is not installed")
	}
	o, err := parseFlags([]string{"-spans", "3000", "-small", "200", "-runs", "1", "-events", "5", "-batch", "700", "-wide", "0", "-timeout", "2m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{"small trace", "large trace", "3000 spans sent", "large/small: 15× the spans", "aim: a 3000-span trace opens within 3s: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

func TestFlags(t *testing.T) {
	if _, err := parseFlags([]string{"-spans", "1"}, io.Discard); err == nil {
		t.Error("-spans 1 accepted")
	}
	o, err := parseFlags(nil, io.Discard)
	if err != nil || o.spans != 1_000_000 || o.small != 1000 || o.wide != 200_000 {
		t.Errorf("defaults %+v, %v", o, err)
	}
}

// TestGenerate: the generated trace has the spans asked for, one root,
// parents before children, children inside their parents' time, and
// more than one host and thread.
func TestGenerate(t *testing.T) {
	for _, n := range []int{2, 3, 1000, 20000} {
		g := newTraceGen(1)
		spans := g.generate(n, 1e18)
		if len(spans) != n {
			t.Fatalf("%d spans, want %d", len(spans), n)
		}
		at := map[uint64]span{}
		threads := map[string]bool{}
		for i, s := range spans {
			if (i == 0) != (s.parent == 0) {
				t.Fatalf("span %d: parent %d", i, s.parent)
			}
			if p, ok := at[s.parent]; s.parent != 0 && (!ok || s.start < p.start || s.end > p.end || s.end <= s.start) {
				t.Fatalf("span %d %+v outside its parent %+v", i, s, p)
			}
			at[s.id] = s
			threads[g.places[s.place].host+s.thread] = true
		}
		if n >= 1000 && len(threads) < 8 {
			t.Errorf("%d spans on %d threads", n, len(threads))
		}
		if _, err := encode([16]byte{1}, spans, g.places, 500); err != nil {
			t.Fatal(err)
		}
	}
}
