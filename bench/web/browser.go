package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium.
type browser struct {
	ctx    context.Context
	cancel func()
	dir    string
}

func startBrowser(ctx context.Context, path string) (*browser, error) {
	if path == "" {
		var err error
		if path, err = exec.LookPath("chromium"); err != nil {
			if path, err = exec.LookPath("chromium-browser"); err != nil {
				return nil, errors.New("no chromium on PATH (apt-get install chromium) and no -chromium")
			}
		}
	}
	dir, err := os.MkdirTemp("", "tracebridge-web-bench-chromium-")
	if err != nil {
		return nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 900),
		chromedp.UserDataDir(dir),
	)
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	b := &browser{ctx: bctx, cancel: func() { cancelB(); cancelA() }, dir: dir}
	if err := chromedp.Do(bctx); err != nil {
		b.close()
		return nil, fmt.Errorf("starting chromium: %w", err)
	}
	return b, nil
}

func (b *browser) close() {
	b.cancel()
	os.RemoveAll(b.dir)
}

// frames are the animation frame intervals (ms) of a measure and the
// drawing times (ms) the timeline recorded in them.
type frames struct {
	interval, draw []float64
}

func (f frames) String() string {
	if len(f.interval) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f/%.1f ms", mean(f.interval), pct(f.interval, 99))
}

// measure opens the trace o.runs times and measures the frames of the
// last open.
func (b *browser) measure(ctx context.Context, base, id, query string, o *options, r *result) error {
	c, cancel := context.WithTimeout(b.ctx, 5*time.Minute)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	for range o.runs {
		if err := chromedp.Do(c, chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/trace/"+id+query)); err != nil {
			return err
		}
		if err := waitTrue(c, `window.__tbTraceReady !== undefined || !!document.querySelector('#view .error')`); err != nil {
			return err
		}
		if msg, _ := chromedp.Run(c, chromedp.Evaluate[string](`(document.querySelector('#view .error') || {}).textContent || ''`)); msg != "" {
			return fmt.Errorf("the page shows an error: %s", msg)
		}
		type marks struct {
			Ready float64 `json:"ready"`
			Fetch float64 `json:"fetch"`
		}
		mark, err := chromedp.Run(c, chromedp.Evaluate[marks](`({ready: window.__tbTraceReady, fetch: window.__tbTraceFetchMs})`))
		if err != nil {
			return err
		}
		r.open = append(r.open, mark.Ready)
		r.fetch = append(r.fetch, mark.Fetch)
	}
	var err error
	if r.scroll, err = frameRun(c, "timeline", "scroll", o.events); err != nil {
		return err
	}
	if r.zoom, err = frameRun(c, "timeline", "zoom", o.events); err != nil {
		return err
	}
	if r.tree, err = frameRun(c, "tree", "scroll", o.events); err != nil {
		return err
	}
	// The other tabs fetch their own data when first shown.
	for _, tab := range []struct{ name, done string }{
		{"flame", `document.querySelector('#flame-canvas') && Number(document.querySelector('#flame-canvas').dataset.frames) > 0`},
		{"rank", `document.querySelector('#rank-table tbody tr')`},
		{"critical", `document.querySelector('#critical-table tbody tr')`},
	} {
		t0 := time.Now()
		if err := chromedp.Do(c, chromedp.Click(chromedp.CSS("#tab-"+tab.name))); err != nil {
			return err
		}
		if err := waitTrue(c, tab.done+` || document.querySelector('#panel-`+tab.name+` .error')`); err != nil {
			return err
		}
		if msg, _ := chromedp.Run(c, chromedp.Evaluate[string](`(document.querySelector('#panel-`+tab.name+` .error') || {}).textContent || ''`)); msg != "" {
			return fmt.Errorf("the %s tab shows an error: %s", tab.name, msg)
		}
		r.tabs = append(r.tabs, time.Since(t0))
		if o.shot != "" && r.name == "large" {
			if err := b.screenshot(ctx, filepath.Join(o.shot, "trace-large-"+tab.name+".png")); err != nil {
				return err
			}
		}
	}
	return chromedp.Do(c, chromedp.Click(chromedp.CSS("#tab-timeline")))
}

// frameJS dispatches one event per animation frame and records the
// frames' intervals and the timeline's drawing times. The timeline
// draws in the frame after its event (its handler asks for a frame), so
// an interval holds one event's drawing.
const frameJS = `(async (what, kind, n) => {
	const raf = () => new Promise((res) => requestAnimationFrame(res));
	const tl = window.__tbTimeline;
	const c = document.querySelector('#tl-canvas');
	const tree = document.querySelector('#trace-tree');
	const r = c.getBoundingClientRect();
	await raf();
	const d0 = tl.drawTimes.length;
	const out = [];
	let last = await raf();
	for (let i = 0; i < n; i++) {
		if (what === 'tree') {
			tree.scrollTop += (i < n / 2 ? 1 : -1) * 22 * 7;
		} else {
			const zoom = kind === 'zoom';
			const dy = zoom ? (i < n / 2 ? -150 : 150) : (i < n / 2 ? 48 : -48);
			c.dispatchEvent(new WheelEvent('wheel', {deltaY: dy, deltaX: zoom ? 0 : 30, ctrlKey: zoom, clientX: r.left + r.width * 0.6, clientY: r.top + 120, bubbles: true, cancelable: true}));
		}
		const t = await raf();
		out.push(t - last);
		last = t;
	}
	return {interval: out, draw: tl.drawTimes.slice(d0)};
})`

func frameRun(ctx context.Context, what, kind string, n int) (frames, error) {
	type answer struct {
		Interval []float64 `json:"interval"`
		Draw     []float64 `json:"draw"`
	}
	expr := fmt.Sprintf("%s(%q, %q, %d)", frameJS, what, kind, n)
	f, err := chromedp.Run(ctx, chromedp.Evaluate[answer](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		return frames{}, fmt.Errorf("%s %s: %w", what, kind, err)
	}
	return frames{interval: f.Interval, draw: f.Draw}, nil
}

// screenshot saves the page as a PNG.
func (b *browser) screenshot(ctx context.Context, path string) error {
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return os.WriteFile(path, png, 0o644)
}

// waitTrue polls a JavaScript condition until it holds.
func waitTrue(ctx context.Context, expr string) error {
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", expr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// getJSON decodes a GET's answer; it returns the status too.
func getJSON(ctx context.Context, url string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != 200 {
		return resp.StatusCode, fmt.Errorf("GET %s: %s %s", url, resp.Status, b)
	}
	return 200, json.Unmarshal(b, v)
}

func median(xs []float64) float64 { return pct(xs, 50) }

// pct answers the p-th percentile (nearest rank) of xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(len(s)-1, i))]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func medianDur(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
