package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// webBridge is the real binary serving the web UI, with a store that
// holds Kieker traces (a real log replayed over TCP), OpenTelemetry
// traces across three services (the real SDK over OTLP/HTTP) and zorka
// traces (a ZICO agent), and a token that may write.
type webBridge struct {
	p     *bridgetest.Process
	base  string // http://127.0.0.1:PORT
	token string
	// traces is what the store holds: host, id and name of each.
	traces []webTrace
}

type webTrace struct {
	Host, TraceID, Name string
	Duration            int64
	Error               bool
}

const webConfig = `flush_interval: 100ms
traces: {window: 200ms}
http: {api_tokens_file: tokens}
receivers:
  - {name: kieker, type: kieker-tcp, listen: "127.0.0.1:0"}
  - {name: zico, type: zico, listen: "127.0.0.1:0"}
  - {name: otlp, type: otlp-http, listen: "127.0.0.1:0"}
  - {name: kdb, type: tcp-server, listen: "127.0.0.1:0"}
sinks:
  - {type: kieker-log, path: logs}
  - {type: store, path: store}
stream: {listen: "127.0.0.1:0"}
`

// startWebBridge starts the bridge and fills its store.
func startWebBridge(t *testing.T) *webBridge {
	t.Helper()
	dir := t.TempDir()
	pair := strings.Split(strings.TrimSpace(ok(t, "token").stdout), "\n")
	writeFile(t, filepath.Join(dir, "tokens"), pair[1]+"\n")
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, webConfig), "--http", "127.0.0.1:0")
	w := &webBridge{p: p, base: httpURL(t, p), token: pair[0]}

	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	want := len(assembleLog(t, log))
	ok(t, "replay", log, "--to", "kieker-tcp://"+p.Addr("kieker"))

	front := newOTLPService(t, "frontend", "", p.Addr("otlp"), "", false)
	checkout := newOTLPService(t, "checkout", "", p.Addr("otlp"), "", false)
	inventory := newOTLPService(t, "inventory", "", p.Addr("otlp"), "", false)
	for i := range 8 {
		shopRequest(front, checkout, inventory, i)
	}
	want += 8

	agent := zicotest.NewAgent(p.Addr("zico"), "zorka-host", "")
	t.Cleanup(func() { agent.Close() })
	rng := rand.New(rand.NewPCG(7, 8))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 6 {
		r := zicotest.Generate(rng, 5+3*i, time.Now().Add(-time.Duration(i)*time.Second))
		if err := agent.Send(ctx, &r); err != nil {
			t.Fatal(err)
		}
	}
	want += 6

	for i := 0; ; i++ {
		code, b := apiGet(t, "GET", w.base+"/api/v1/traces?limit=10000", "", "")
		var all struct{ Traces []webTrace }
		if code != 200 {
			t.Fatalf("search: %d %s", code, b)
		}
		json.Unmarshal(b, &all)
		if len(all.Traces) >= want {
			w.traces = all.Traces
			break
		}
		if i > 200 {
			t.Fatalf("%d traces in the store, want %d", len(all.Traces), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return w
}

// find returns the first stored trace on host (a prefix of its name
// will do).
func (w *webBridge) find(t *testing.T, host string) webTrace {
	t.Helper()
	for _, tr := range w.traces {
		if strings.HasPrefix(tr.Host, host) {
			return tr
		}
	}
	t.Fatalf("no trace of host %s in %v", host, w.traces)
	return webTrace{}
}

// browser starts a headless Chromium (Debian's chromium) for the test
// and answers its context, bounded to three minutes.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if path, err = exec.LookPath("chromium-browser"); err != nil {
			if os.Getenv("TRACEBRIDGE_REQUIRE_SERVICES") != "" {
				t.Fatal("chromium is not installed; TRACEBRIDGE_REQUIRE_SERVICES is set")
			}
			t.Skip("chromium is not installed (apt-get install chromium); .ci/run installs it")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first call starts the browser; it lives as long as bctx.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// act runs chromedp steps, failing the test with a screenshot and the
// page's text on error.
func act(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		failPage(t, ctx, what, err)
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a
// promise) and answers its value.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		failPage(t, ctx, "evaluating "+expr, err)
	}
	return v
}

// waitJS waits until the expression is true in the page (at most 20 s).
// clickNow clicks the element sel selects once it is there, finding and
// clicking it in one step in the page: chromedp.Click queries a node and
// then clicks it, and a table the page renders again meanwhile (the
// console's, every second) has replaced the node ("Could not find node
// with given id").
func clickNow(t *testing.T, ctx context.Context, what, sel string) {
	t.Helper()
	waitJS(t, ctx, what, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true; })()`, sel))
}

func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		v, err := chromedp.Run(c, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && v {
			return
		}
		if c.Err() != nil {
			failPage(t, ctx, "waiting for "+what, fmt.Errorf("%s is not true after 20 s (%v)", expr, err))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// evalUntil waits until the expression is true in the page (at most
// 20 s) and answers whether it became true, so that the caller can say
// what the page shows instead.
func evalUntil(t *testing.T, ctx context.Context, expr string) bool {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if v, err := chromedp.Run(c, chromedp.Evaluate[bool]("!!("+expr+")")); err == nil && v {
			return true
		}
		if c.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func failPage(t *testing.T, ctx context.Context, what string, err error) {
	t.Helper()
	shot(t, ctx, "failed-"+strings.NewReplacer(" ", "-", "/", "-").Replace(what))
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	text, _ := chromedp.Run(c, chromedp.Evaluate[string]("document.body.innerText"))
	cancel()
	t.Fatalf("%s: %v\npage text: %.2000s", what, err, text)
}

// shot saves a screenshot of the page in the test's artifact directory
// (go test -artifacts keeps them; .ci/run keeps them in
// /tmp/tracebridge-artifacts).
func shot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	t.Logf("screenshot: %s", path)
	return path
}

// css is a CSS selector.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// login gives the page the bridge's token through the Token dialog.
func (w *webBridge) login(t *testing.T, ctx context.Context) {
	t.Helper()
	act(t, ctx, "login",
		chromedp.Click(css("#token-button")),
		chromedp.WaitVisible(css("#token-input")),
		chromedp.SendKeys(css("#token-input"), w.token),
		chromedp.Click(css("#token-save")),
		chromedp.WaitVisible(css("#token-button.has-token")),
	)
}

// canvasInk answers how many pixels of the canvas matched by sel are
// neither transparent nor near white: a drawn canvas has many.
func canvasInk(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	return eval[int](t, ctx, `(() => {
		const c = document.querySelector(`+jsString(sel)+`);
		if (!c) return -1;
		const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
		let n = 0;
		for (let i = 0; i < d.length; i += 4) if (d[i+3] > 0 && (d[i] < 240 || d[i+1] < 240 || d[i+2] < 240)) n++;
		return n;
	})()`)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestWebServesThePage: every address outside the API answers with the
// page (so /trace/{id} can be shared), with a strict content security
// policy; scripts and styles come from /ui/; the API's 404s stay JSON.
func TestWebServesThePage(t *testing.T) {
	p := bridgetest.StartConfig(t, "http: \"127.0.0.1:0\"\nreceivers: [{name: k, type: kieker-tcp, listen: \"127.0.0.1:0\"}]\nsinks: [{type: store, path: store}]\n")
	base := httpURL(t, p)
	for _, path := range []string{"/", "/search?name=x", "/trace/0123456789abcdef0123456789abcdef", "/console"} {
		code, b := apiGet(t, "GET", base+path, "", "")
		if code != 200 || !strings.Contains(string(b), `<script type="module" src="/ui/js/app.js">`) {
			t.Errorf("%s: %d %.200s", path, code, b)
		}
	}
	if code, b := apiGet(t, "GET", base+"/ui/js/app.js", "", ""); code != 200 || !strings.Contains(string(b), "import") {
		t.Errorf("app.js: %d %.100s", code, b)
	}
	if code, _ := apiGet(t, "GET", base+"/ui/js/nothing.js", "", ""); code != 404 {
		t.Errorf("a missing script: %d", code)
	}
	if code, b := apiGet(t, "GET", base+"/api/v1/nothing", "", ""); code != 404 || !strings.Contains(string(b), `"error"`) {
		t.Errorf("an unknown endpoint: %d %s", code, b)
	}
	if code, _ := apiGet(t, "POST", base+"/search", "", ""); code != 405 {
		t.Errorf("POST to the page: %d", code)
	}
	p.Stop()
}

// TestWebLoads: the page loads in Chromium, its router shows each view
// from the navigation bar, and the console shows no script error.
func TestWebLoads(t *testing.T) {
	p := bridgetest.StartConfig(t, "http: \"127.0.0.1:0\"\nreceivers: [{name: k, type: kieker-tcp, listen: \"127.0.0.1:0\"}]\nsinks: [{type: store, path: store}]\n")
	base := httpURL(t, p)
	ctx := browser(t)
	act(t, ctx, "open", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#nav a.active")))
	for _, v := range []string{"hosts", "analysis", "live", "console", "compare", "search"} {
		act(t, ctx, "nav "+v,
			chromedp.Click(css(`#nav a[data-view="`+v+`"]`)),
			chromedp.WaitVisible(css(`#nav a.active[data-view="`+v+`"]`)))
		url := eval[string](t, ctx, "location.href")
		if !strings.HasSuffix(strings.SplitN(url, "?", 2)[0], "/"+v) {
			t.Errorf("after the %s link the address is %s", v, url)
		}
	}
	// This bridge has no live stream: the live page says what to
	// configure instead of reconnecting for ever.
	act(t, ctx, "live", chromedp.Click(css(`#nav a[data-view="live"]`)))
	waitJS(t, ctx, "the live page's advice", `document.querySelector('.live-status').dataset.state === 'error' && document.querySelector('.live-status').textContent.includes('stream: {listen:')`)
	p.Stop()
}
