package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/tracebridge/tracebridge/internal/codec/otlp"
	"github.com/tracebridge/tracebridge/internal/record"
)

// sendStatsTrace sends, with the real SDK over OTLP/HTTP, a trace whose
// statistics are known (times in ms from its start):
//
//	stats-front GET /stats 0─100 ─┬─ stats-db query 10─40 ─── stats-db fetch 20─35
//	                              ├─ stats-db query 30─60     (overlaps the first: the root's children cover 10─60)
//	                              ├─ stats-cache get 90─120   (ends after the root: 90─100 counts)
//	                              └─ stats-cache get 50─55    (within 10─60: adds nothing)
//
// and answers its id.
func sendStatsTrace(t *testing.T, otlpAddr string) string {
	t.Helper()
	front := newOTLPService(t, "stats-front", "", otlpAddr, "", false)
	db := newOTLPService(t, "stats-db", "", otlpAddr, "", false)
	cache := newOTLPService(t, "stats-cache", "", otlpAddr, "", false)
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	_, root := front.tr.Start(context.Background(), "GET /stats", oteltrace.WithTimestamp(at(0)), oteltrace.WithSpanKind(oteltrace.SpanKindServer))
	remote := oteltrace.ContextWithRemoteSpanContext(context.Background(), root.SpanContext())
	span := func(s *otlpService, parent context.Context, name string, from, to int) context.Context {
		ctx, sp := s.tr.Start(parent, name, oteltrace.WithTimestamp(at(from)))
		sp.End(oteltrace.WithTimestamp(at(to)))
		return ctx
	}
	q := span(db, remote, "query", 10, 40)
	span(db, q, "fetch", 20, 35)
	span(db, remote, "query", 30, 60)
	span(cache, remote, "get", 90, 120)
	span(cache, remote, "get", 50, 55)
	root.End(oteltrace.WithTimestamp(at(100)))
	return root.SpanContext().TraceID().String()
}

// TestWebJaegerFeatures: what a Jaeger user looks for, in Chromium
// against the real binary: the search page's service and operation
// drop-downs (filled from the API, operations following the service)
// and a search by them; a trace's "Trace JSON" downloads in Jaeger's
// JSON and in OTLP/JSON, holding every span; and the trace statistics
// of a trace whose figures are known.
func TestWebJaegerFeatures(t *testing.T) {
	w := startWebBridge(t)
	statsID := sendStatsTrace(t, w.p.Addr("otlp"))
	var statsTrace struct{ Spans []json.RawMessage }
	pollFor(t, func() bool {
		code, b := apiGet(t, "GET", w.base+"/api/v1/traces/"+statsID, "", "")
		return code == 200 && json.Unmarshal(b, &statsTrace) == nil && len(statsTrace.Spans) == 6
	})
	ctx := browser(t)

	t.Run("drop-downs", func(t *testing.T) {
		var services, ops struct{ Data []string }
		getJSON(t, w.base+"/api/services", &services)
		searchOpen(t, ctx, w, "/search")
		// The services are Jaeger's, after "all services".
		waitJS(t, ctx, "the services", `document.querySelectorAll('#f-service option').length > 1`)
		if got := eval[[]string](t, ctx, `[...document.querySelectorAll('#f-service option')].map(o => o.value)`); !slices.Equal(got, append([]string{""}, services.Data...)) {
			t.Fatalf("the service drop-down offers %q, Jaeger's /api/services %q", got, services.Data)
		}
		if !slices.Contains(services.Data, "checkout") || !slices.Contains(services.Data, "stats-db") {
			t.Fatalf("services %v", services.Data)
		}
		if !eval[bool](t, ctx, `document.querySelector('#f-operation').disabled`) {
			t.Error("the operation drop-down is enabled without a service")
		}
		pick := func(sel, v string) {
			t.Helper()
			eval[bool](t, ctx, `(() => { const s = document.querySelector(`+jsString(sel)+`); s.value = `+jsString(v)+`; s.dispatchEvent(new Event('change')); return s.value === `+jsString(v)+` })()`)
		}
		// The operations follow the service chosen.
		for _, svc := range []string{"stats-db", "checkout"} {
			pick("#f-service", svc)
			getJSON(t, w.base+"/api/services/"+url.PathEscape(svc)+"/operations", &ops)
			waitJS(t, ctx, "the operations of "+svc, `document.querySelector('#f-operation').dataset.service === `+jsString(svc)+` && !document.querySelector('#f-operation').disabled`)
			if got := eval[[]string](t, ctx, `[...document.querySelectorAll('#f-operation option')].map(o => o.value)`); !slices.Equal(got, append([]string{""}, ops.Data...)) {
				t.Errorf("the operations of %s offered are %q, Jaeger's API says %q", svc, got, ops.Data)
			}
		}
		pick("#f-operation", "inventory.Reserve#2")
		shot(t, ctx, "search-service-operation")
		searchSubmit(t, ctx)
		if got := addressQuery(t, ctx); got.Get("service") != "checkout" || got.Get("operation") != "inventory.Reserve#2" {
			t.Errorf("the address holds %v", got)
		}
		got := searchTableIDs(t, ctx)
		want := summaryIDs(w.apiSearch(t, "service=checkout&operation=inventory.Reserve%232&limit=100"))
		// shopRequest i calls the inventory 1 + i%3 times: #2 in 2 of 8.
		if len(want) != 2 || !slices.Equal(got, want) {
			t.Errorf("the table shows %v, the API answers %v (want 2 traces)", got, want)
		}
		var jt struct{ Data []struct{ TraceID string } }
		getJSON(t, w.base+"/api/traces?service=checkout&operation=inventory.Reserve%232&limit=100", &jt)
		var jids []string
		for _, x := range jt.Data {
			jids = append(jids, x.TraceID)
		}
		if !sameIDSet(got, jids) {
			t.Errorf("the table shows %v, Jaeger's search %v", got, jids)
		}
		// A reload of the address shows the same choice.
		searchOpen(t, ctx, w, "/search?service=checkout&operation=inventory.Reserve%232")
		waitJS(t, ctx, "the choice again", `document.querySelector('#f-service').value === 'checkout' && document.querySelector('#f-operation').value === 'inventory.Reserve#2' && document.querySelectorAll('#f-operation option').length > 2`)
		if got := searchTableIDs(t, ctx); !slices.Equal(got, want) {
			t.Errorf("reloaded: the table shows %v, want %v", got, want)
		}
		// Another service empties the operation.
		pick("#f-service", "stats-front")
		waitJS(t, ctx, "the operations of stats-front", `document.querySelector('#f-operation').dataset.service === 'stats-front'`)
		if v := eval[string](t, ctx, `[...document.querySelectorAll('#f-operation option')].map(o => o.value).join('|') + '=' + document.querySelector('#f-operation').value`); v != "|GET /stats=" {
			t.Errorf("stats-front's operations and the choice: %q", v)
		}
		noBanner(t, ctx)
	})

	t.Run("download", func(t *testing.T) {
		dir := t.TempDir()
		act(t, ctx, "allow downloads", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			yes := true
			_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
				Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir, EventsEnabled: &yes})
			return err
		}))
		kieker := w.find(t, "realclients")
		for _, id := range []string{statsID, kieker.TraceID, w.find(t, "frontend").TraceID} {
			var tr struct {
				TraceID string
				Spans   []struct {
					SpanID    string
					Operation string
				}
			}
			getJSON(t, w.base+"/api/v1/traces/"+id, &tr)
			var want []string
			for _, s := range tr.Spans {
				want = append(want, s.SpanID+" "+s.Operation)
			}
			slices.Sort(want)
			openTrace(t, ctx, w.base, "/trace/"+id)
			for _, format := range []string{"jaeger", "otlp"} {
				act(t, ctx, "download "+format, chromedp.Click(css("#download-"+format)))
				b := waitFile(t, filepath.Join(dir, "trace-"+id+"."+format+".json"))
				var got []string
				switch format {
				case "jaeger":
					var env struct {
						Data []struct {
							TraceID string
							Spans   []struct{ SpanID, OperationName string }
						}
					}
					if err := json.Unmarshal(b, &env); err != nil || len(env.Data) != 1 {
						t.Fatalf("%s: the Jaeger JSON does not parse as Jaeger's: %v\n%.300s", id, err, b)
					}
					for _, s := range env.Data[0].Spans {
						got = append(got, s.SpanID+" "+s.OperationName)
					}
					hex := env.Data[0].TraceID
					if _, jaeger := apiGet(t, "GET", w.base+"/api/traces/"+hex, "", ""); !bytes.Equal(b, jaeger) {
						t.Errorf("%s: the download is not what Jaeger's /api/traces/%s answers", id, hex)
					}
				case "otlp":
					td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
					if err != nil {
						t.Fatalf("%s: the OTLP JSON does not parse: %v\n%.300s", id, err, b)
					}
					for _, rs := range td.ResourceSpans().All() {
						for _, ss := range rs.ScopeSpans().All() {
							for _, s := range ss.Spans().All() {
								got = append(got, s.SpanID().String()+" "+s.Name())
							}
						}
					}
					// The bridge's own OTLP decoder takes every span.
					res, err := otlp.NewDecoder(otlp.Options{}).DecodeJSON(b, &record.Batch{}, func() *record.Batch { return &record.Batch{} })
					if err != nil || res.Spans != len(tr.Spans) || res.Rejected != 0 {
						t.Errorf("%s: the OTLP decoder reads %+v, %v", id, res, err)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s %s: the download holds %d spans %v, the trace %d %v", id, format, len(got), got, len(want), want)
				}
			}
		}
		noBanner(t, ctx)
	})

	t.Run("statistics", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+statsID)
		act(t, ctx, "statistics", chromedp.Click(css("#tab-stats")))
		waitJS(t, ctx, "the statistics", `document.querySelector('#panel-stats')?.dataset.rows === '4'`)
		if q := pageQuery(t, ctx).Get("tab"); q != "stats" {
			t.Errorf("the address holds tab=%q", q)
		}
		type row struct {
			Service, Operation string
			Values             map[string]float64
			Text               map[string]string
		}
		read := func() []row {
			return eval[[]row](t, ctx, `[...document.querySelectorAll('#stats-table tbody tr')].map(tr => ({
				service: tr.dataset.service, operation: tr.dataset.operation,
				values: Object.fromEntries([...tr.querySelectorAll('td[data-value]')].map(td => [td.dataset.key, Number(td.dataset.value)])),
				text: Object.fromEntries([...tr.querySelectorAll('td[data-key]')].map(td => [td.dataset.key, td.textContent])),
			}))`)
		}
		ms := 1e6
		// By hand from the trace's shape (sendStatsTrace); the trace lasts
		// 120 ms.
		want := map[string]map[string]float64{
			"stats-front GET /stats": {"count": 1, "totalNs": 100 * ms, "avgNs": 100 * ms, "minNs": 100 * ms, "maxNs": 100 * ms,
				"selfTotalNs": 40 * ms, "selfAvgNs": 40 * ms, "selfMinNs": 40 * ms, "selfMaxNs": 40 * ms, "selfShare": 40.0 / 120},
			"stats-db query": {"count": 2, "totalNs": 60 * ms, "avgNs": 30 * ms, "minNs": 30 * ms, "maxNs": 30 * ms,
				"selfTotalNs": 45 * ms, "selfAvgNs": 22.5 * ms, "selfMinNs": 15 * ms, "selfMaxNs": 30 * ms, "selfShare": 45.0 / 120},
			"stats-cache get": {"count": 2, "totalNs": 35 * ms, "avgNs": 17.5 * ms, "minNs": 5 * ms, "maxNs": 30 * ms,
				"selfTotalNs": 35 * ms, "selfAvgNs": 17.5 * ms, "selfMinNs": 5 * ms, "selfMaxNs": 30 * ms, "selfShare": 35.0 / 120},
			"stats-db fetch": {"count": 1, "totalNs": 15 * ms, "avgNs": 15 * ms, "minNs": 15 * ms, "maxNs": 15 * ms,
				"selfTotalNs": 15 * ms, "selfAvgNs": 15 * ms, "selfMinNs": 15 * ms, "selfMaxNs": 15 * ms, "selfShare": 15.0 / 120},
		}
		rows := read()
		var order []string
		for _, r := range rows {
			k := r.Service + " " + r.Operation
			order = append(order, k)
			w, ok := want[k]
			if !ok {
				t.Errorf("a row %q", k)
				continue
			}
			for key, v := range w {
				if got := r.Values[key]; got != v {
					t.Errorf("%s %s: %v, want %v", k, key, got, v)
				}
			}
		}
		// Largest total first.
		if !slices.Equal(order, []string{"stats-front GET /stats", "stats-db query", "stats-cache get", "stats-db fetch"}) {
			t.Errorf("rows in the order %v", order)
		}
		// What the table shows of them.
		if r := rows[1]; r.Text["selfTotalNs"] != "45.0ms" || r.Text["selfAvgNs"] != "22.5ms" || r.Text["selfShare"] != "37.50 %" || r.Text["count"] != "2" {
			t.Errorf("the row of stats-db query shows %v", r.Text)
		}
		// Grouped by service.
		eval[bool](t, ctx, `(() => { const s = document.querySelector('#stats-group'); s.value = 'service'; s.dispatchEvent(new Event('change')); return true })()`)
		waitJS(t, ctx, "the statistics by service", `document.querySelector('#panel-stats').dataset.rows === '3'`)
		rows = read()
		got := map[string][2]float64{}
		for _, r := range rows {
			got[r.Service] = [2]float64{r.Values["count"], r.Values["selfTotalNs"]}
			if _, ok := r.Text["operation"]; ok {
				t.Errorf("grouped by service, a row shows an operation: %v", r.Text)
			}
		}
		if wantS := map[string][2]float64{"stats-front": {1, 40 * ms}, "stats-db": {3, 60 * ms}, "stats-cache": {2, 35 * ms}}; !maps.Equal(got, wantS) {
			t.Errorf("by service: %v, want %v", got, wantS)
		}
		if q := pageQuery(t, ctx).Get("group"); q != "service" {
			t.Errorf("the address holds group=%q", q)
		}
		// A reload shows the same view.
		openTrace(t, ctx, w.base, "/trace/"+statsID+"?tab=stats&group=service")
		waitJS(t, ctx, "the statistics by service again", `document.querySelector('#panel-stats')?.dataset.rows === '3'`)
		shot(t, ctx, "trace-statistics")
		noBanner(t, ctx)
	})
}

// waitFile waits (20 s at most) until the browser has saved a download
// at path and answers its content.
func waitFile(t *testing.T, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			if _, err := os.Stat(path + ".crdownload"); errors.Is(err, os.ErrNotExist) {
				return b
			}
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(filepath.Dir(path))
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("no download at %s after 20 s (the directory holds %s)", path, strings.Join(names, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
