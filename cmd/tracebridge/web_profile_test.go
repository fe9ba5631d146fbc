package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/jfrview"
)

// TestWebProfile: a jfr receiver reads a real JVM's recording (its
// repository, from the beginning); the analyses page's JFR profile tab
// draws the host's flame graph of the recording's time — the frames the
// API answers, on a canvas with ink.
func TestWebProfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "workload.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	jvm := filepath.Join(work, "repository", "2026_01_02_03_04_05_1")
	os.MkdirAll(jvm, 0o755)
	splitRecording(t, data, jvm)
	yaml := fmt.Sprintf("flush_interval: 100ms\nhttp: \"127.0.0.1:0\"\nreceivers:\n  - {name: jvms, type: jfr, repository: %q, start: beginning, host: shop-jvm}\nsinks:\n  - {type: kieker-log, path: logs}\n", filepath.Join(work, "repository"))
	p := bridgetest.Start(t, work, "-c", bridgetest.WriteConfig(t, work, yaml), "--no-store")
	base := httpURL(t, p)
	const since = "2000-01-01T00:00:00Z"
	var flame struct {
		Unit string
		Root struct {
			Value    int64
			Children []struct{ Name string }
		}
	}
	for i := 0; ; i++ {
		code, b := apiGet(t, "GET", base+"/api/v1/profiles/flame?host=shop-jvm&since="+since, "", "")
		if code == 200 {
			json.Unmarshal(b, &flame)
			break
		}
		if i > 100 {
			t.Fatalf("the host's flame graph: %d %s\nstderr:\n%s", code, b, p.Stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if flame.Unit != "samples" || flame.Root.Value < 10 || len(flame.Root.Children) == 0 {
		t.Fatalf("the API's flame graph: %+v", flame)
	}
	ctx := browser(t)
	w := &webBridge{p: p, base: base}
	openView(t, ctx, w, "/analysis?tab=profile&phost=shop-jvm&since="+since)
	waitJS(t, ctx, "the flame graph", `document.querySelector('.profile-out canvas')`)
	if n := canvasInk(t, ctx, ".profile-out canvas"); n < 2000 {
		t.Errorf("the JFR flame graph has %d pixels of ink", n)
	}
	// The page draws the frames the API answers: a hover on the widest
	// frame below the root names one of the root's children.
	tip := eval[string](t, ctx, `(() => { const c = document.querySelector('.profile-out canvas'), r = c.getBoundingClientRect();
		c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 3, clientY: r.bottom - 26, bubbles: true}));
		const t = document.querySelector('.profile-out .tl-tip'); return t && !t.hidden ? t.textContent : ''; })()`)
	found := false
	for _, c := range flame.Root.Children {
		if strings.Contains(tip, c.Name) {
			found = true
		}
	}
	if !found {
		t.Errorf("hovering the second row says %q; the root's children are %+v", tip, flame.Root.Children)
	}
	shot(t, ctx, "analysis-profile")

	// Below the graph, JMC's views: the contended monitors' table shows
	// the waits the API counts per class, the heap table a row per
	// collection.
	var views jfrview.Views
	if code, b := apiGet(t, "GET", base+"/api/v1/profiles/views?host=shop-jvm&since="+since, "", ""); code != 200 || json.Unmarshal(b, &views) != nil || len(views.Monitors) == 0 || len(views.Heap) == 0 {
		t.Fatalf("the API's views: %d %.300s", code, b)
	}
	m := views.Monitors[0]
	waitJS(t, ctx, "the monitors' table", fmt.Sprintf(`[...document.querySelectorAll('.profile-views [data-view=monitors] tbody tr')].some((tr) => tr.cells[0].textContent === %q && tr.cells[1].textContent === %q)`,
		m.Class, strconv.FormatInt(m.Count, 10)))
	if n := eval[int](t, ctx, `document.querySelectorAll('.profile-views [data-view=heap] tbody tr').length`); n != min(len(views.Heap), n) || n == 0 {
		t.Errorf("%d heap rows, the API has %d points", n, len(views.Heap))
	}
	// The GC timeline: a bar per collection, the heap line.
	if n := eval[int](t, ctx, `document.querySelectorAll('.profile-views [data-view=gc] svg.gc-timeline rect.gc-bar').length`); n != len(views.GC.Pauses) {
		t.Errorf("%d bars in the GC timeline, the API has %d collections", n, len(views.GC.Pauses))
	}
	if !eval[bool](t, ctx, `!!document.querySelector('.profile-views [data-view=gc] svg.gc-timeline path.gc-heap')`) {
		t.Error("the GC timeline has no heap line")
	}
	shot(t, ctx, "analysis-profile-views")

	// The kind selector: lock waits, in time, with the monitor's class
	// on top (the recording's jdk.JavaMonitorEnter events), as the API
	// answers them; the address keeps the kind.
	var lock struct {
		Unit string
		Root struct {
			Value    int64
			Children []struct{ Name string }
		}
	}
	code, b := apiGet(t, "GET", base+"/api/v1/profiles/flame?kind=lock&host=shop-jvm&since="+since, "", "")
	if code != 200 || json.Unmarshal(b, &lock) != nil || lock.Unit != "ns" || len(lock.Root.Children) == 0 || !strings.Contains(string(b), `"java.lang.Object"`) {
		t.Fatalf("the API's lock flame graph: %d %.300s", code, b)
	}
	eval[bool](t, ctx, `(() => { const s = document.querySelector('select[name=pkind]'); s.value = 'lock'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
	waitJS(t, ctx, "the lock flame graph", `location.search.includes('pkind=lock') && document.querySelector('.profile-out .profile-total') && document.querySelector('.profile-out canvas')`)
	if n := canvasInk(t, ctx, ".profile-out canvas"); n < 2000 {
		t.Errorf("the lock flame graph has %d pixels of ink", n)
	}
	tip = eval[string](t, ctx, `(() => { const c = document.querySelector('.profile-out canvas'), r = c.getBoundingClientRect();
		c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 3, clientY: r.bottom - 26, bubbles: true}));
		const t = document.querySelector('.profile-out .tl-tip'); return t && !t.hidden ? t.textContent : ''; })()`)
	found = false
	for _, c := range lock.Root.Children {
		if strings.Contains(tip, c.Name) {
			found = true
		}
	}
	if !found || strings.Contains(tip, "samples") {
		t.Errorf("hovering the lock graph's second row says %q; the root's children are %+v", tip, lock.Root.Children)
	}
	shot(t, ctx, "analysis-profile-lock")
	checkCSP(t, ctx)
	act(t, ctx, "leave", chromedp.Navigate("about:blank"))
	p.Stop()
}
