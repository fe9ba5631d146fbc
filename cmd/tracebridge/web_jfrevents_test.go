package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

// TestWebJFREvents: a committed recording of a real JVM
// (testdata/workload.jfr) pushed to a jfr-http receiver (multipart, as
// Pyroscope's agent posts it) shows in the profile tab's event browser
// (checkWebJFREvents). TestServeJFRUpload runs the same checks on a
// running JVM's jcmd JFR.dump posted with curl. A host without execution
// samples has no flame graph but its views and its event browser.
func TestWebJFREvents(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "workload.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	yaml := "flush_interval: 100ms\nhttp: \"127.0.0.1:0\"\nreceivers:\n  - {name: push, type: jfr-http, listen: \"127.0.0.1:0\"}\n" +
		"  - {name: locks, type: jfr-http, listen: \"127.0.0.1:0\", types: [jdk.JavaMonitorEnter]}\nsinks:\n  - {type: kieker-log, path: logs}\n"
	p := bridgetest.Start(t, work, "-c", bridgetest.WriteConfig(t, work, yaml), "--no-store")
	body, ctype := multipartJFR(t, data)
	resp, err := http.Post("http://"+p.Addr("push")+"/ingest?format=jfr&name=shop-up", ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var up struct{ Events int64 }
	json.NewDecoder(resp.Body).Decode(&up)
	resp.Body.Close()
	if resp.StatusCode != 200 || up.Events == 0 {
		t.Fatalf("upload: %d %+v", resp.StatusCode, up)
	}
	checkWebJFREvents(t, p, "shop-up", up.Events)

	// A host without execution samples (a receiver that takes monitor
	// enters only): a notice stands where the graph would, and the views
	// and the event browser are there.
	resp, err = http.Post("http://"+p.Addr("locks")+"/ingest?format=jfr&name=shop-locks", ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("upload of monitor enters: %d", resp.StatusCode)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if code, _ := apiGet(t, "GET", httpURL(t, p)+"/api/v1/jfr/types?host=shop-locks", "", ""); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no events of shop-locks")
		}
	}
	ctx := browser(t)
	openView(t, ctx, &webBridge{p: p, base: httpURL(t, p)}, "/analysis?tab=profile&phost=shop-locks&since=2000-01-01T00:00:00Z&etype=jdk.JavaMonitorEnter")
	waitJS(t, ctx, "the event browser of a host without samples", `document.querySelector('.profile-none') !== null && document.querySelectorAll('.jfr-events tbody tr.jfr-row').length > 0 && document.querySelector('.jfr-view[data-view=monitors]') !== null`)
	act(t, ctx, "leave", chromedp.Navigate("about:blank"))
	p.Stop()
}

// checkWebJFREvents: once host's events have all reached the profile
// stage (the types' counts add up to events), the profile tab's event
// browser shows what the API answers: the type selector lists the types
// with their counts, the table the page of jdk.JavaMonitorEnter events,
// newest first; a thread filter keeps that thread's events; a click on a
// row opens the event with its whole stack trace.
func checkWebJFREvents(t *testing.T, p *bridgetest.Process, host string, events int64) {
	t.Helper()
	base := httpURL(t, p)
	// Every event has reached the profile stage when the types' counts
	// add up to the upload's.
	var types struct {
		Types []struct {
			Name  string
			Count int64
		}
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, b := apiGet(t, "GET", base+"/api/v1/jfr/types?host="+host, "", "")
		var n int64
		if code == 200 && json.Unmarshal(b, &types) == nil {
			for _, tc := range types.Types {
				n += tc.Count
			}
		}
		if n == events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("types: %d events of %d; %d %.300s", n, events, code, b)
		}
	}
	const since = "2000-01-01T00:00:00Z"
	const typ = "jdk.JavaMonitorEnter"
	var page struct {
		Total  int
		Events []struct {
			ID     int64
			Thread string
		}
	}
	if code, b := apiGet(t, "GET", base+"/api/v1/jfr/events?host="+host+"&type="+typ+"&since="+since, "", ""); code != 200 || json.Unmarshal(b, &page) != nil || page.Total == 0 {
		t.Fatalf("events: %d %.300s", code, b)
	}
	// Wait for the flame graph's samples too: the tab draws the browser
	// under the graph.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if code, _ := apiGet(t, "GET", base+"/api/v1/profiles/flame?host="+host+"&since="+since, "", ""); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no flame graph of the uploaded recording")
		}
	}
	ctx := browser(t)
	w := &webBridge{p: p, base: base}
	openView(t, ctx, w, "/analysis?tab=profile&phost="+host+"&since="+since+"&etype="+typ)
	waitJS(t, ctx, "the event browser's rows", `document.querySelectorAll('.jfr-events tbody tr.jfr-row').length > 0`)
	if n := eval[int](t, ctx, `document.querySelectorAll('select[name=etype] option').length`); n != len(types.Types) {
		t.Errorf("%d types in the selector, the API lists %d", n, len(types.Types))
	}
	for _, tc := range types.Types {
		label := eval[string](t, ctx, fmt.Sprintf(`(document.querySelector('select[name=etype] option[value=%q]') || {}).textContent || ''`, tc.Name))
		if !strings.Contains(label, tc.Name) || !strings.HasSuffix(strings.ReplaceAll(label, ",", ""), ": "+strconv.FormatInt(tc.Count, 10)) {
			t.Errorf("type %s: option %q, count %d", tc.Name, label, tc.Count)
		}
	}
	rows := eval[[]string](t, ctx, `[...document.querySelectorAll('.jfr-events tbody tr.jfr-row')].map((tr) => tr.dataset.id)`)
	if len(rows) != min(100, page.Total) || rows[0] != strconv.FormatInt(page.Events[0].ID, 10) {
		t.Errorf("rows %d (first %v), the API: %d events, first %d", len(rows), rows[:min(1, len(rows))], page.Total, page.Events[0].ID)
	}
	if total := eval[string](t, ctx, `document.querySelector('.jfr-events .jfr-total').textContent`); !strings.HasPrefix(strings.ReplaceAll(total, ",", ""), strconv.Itoa(page.Total)+" ") {
		t.Errorf("total %q, the API %d", total, page.Total)
	}
	shot(t, ctx, "analysis-jfr-events")

	// A thread filter.
	thread := page.Events[0].Thread
	code, b := apiGet(t, "GET", base+"/api/v1/jfr/events?host="+host+"&type="+typ+"&since="+since+"&thread="+url.QueryEscape(thread), "", "")
	var byThread struct{ Total int }
	if code != 200 || json.Unmarshal(b, &byThread) != nil {
		t.Fatalf("by thread: %d %s", code, b)
	}
	eval[bool](t, ctx, fmt.Sprintf(`(() => { document.querySelector('input[name=ethread]').value = %q; document.querySelector('.jfr-events form button[type=submit]').click(); return true; })()`, thread))
	waitJS(t, ctx, "the thread's events", fmt.Sprintf(`location.search.includes('ethread=') && (document.querySelector('.jfr-events .jfr-total') || {}).textContent === %q`, fmt.Sprintf("%d events match", byThread.Total)))

	// One event, its whole stack.
	eval[bool](t, ctx, `(() => { document.querySelector('.jfr-events tbody tr.jfr-row').click(); return true; })()`)
	waitJS(t, ctx, "the event's stack trace", `(document.querySelector('.jfr-detail .jfr-stack') || {}).textContent > ''`)
	stack := eval[string](t, ctx, `document.querySelector('.jfr-detail .jfr-stack').textContent`)
	if !strings.Contains(stack, " line: ") {
		t.Errorf("stack %q", stack)
	}
	shot(t, ctx, "analysis-jfr-event")
	checkCSP(t, ctx)
	act(t, ctx, "leave", chromedp.Navigate("about:blank"))
}
