// Command web measures the web UI's trace page on a huge trace: how long
// a trace of a million spans takes to open (until its timeline and call
// tree are drawn) and how smoothly its timeline scrolls and zooms and its
// tree scrolls, against a trace of a thousand spans in the same run.
//
//	go run ./bench/web [-spans 1000000] [-small 1000] [-bin tracebridge] [-runs 3]
//
// It builds tracebridge (or takes -bin), starts `serve` with an
// otlp-http receiver and a store in a temporary directory and the HTTP
// API on a free loopback port, sends each trace as OpenTelemetry spans
// over OTLP/HTTP in batches (a trace over hosts, processes and threads,
// see gen.go), waits until the store holds it whole, and drives a
// headless Chromium (Debian's chromium, through chromedp) to
// /trace/{id}. Open time is the page's own mark (window.__tbTraceReady:
// ms from the navigation's start until the timeline and the tree are
// drawn); frame times are the intervals between animation frames while
// one wheel or scroll event is dispatched per frame (16.7 ms is a frame
// at 60 Hz: a longer one was dropped), with the timeline's own drawing
// time beside them.
//
// It exits non-zero when the large trace takes more than 3 s to open. It
// is run by hand, never by CI; web_test.go runs it small.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// aimOpen is what the trace page must reach on the large trace.
const aimOpen = 3 * time.Second

type options struct {
	spans, small, runs, events, batch int
	wide                              int
	bin, chromium, shot               string
	keep                              bool
	timeout                           time.Duration
}

func main() {
	os.Exit(benchkit.Main(os.Args[1:], parseFlags, func(ctx context.Context, o *options, stdout, stderr io.Writer) int {
		if err := run(ctx, o, stdout); err != nil {
			fmt.Fprintln(stderr, "web bench:", err)
			return 1
		}
		return 0
	}))
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("web", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	fs.IntVar(&o.spans, "spans", 1_000_000, "spans of the large trace")
	fs.IntVar(&o.small, "small", 1_000, "spans of the small trace (the baseline)")
	fs.IntVar(&o.runs, "runs", 3, "page opens per trace (the median is reported)")
	fs.IntVar(&o.events, "events", 50, "wheel and scroll events per measure (one per frame)")
	fs.IntVar(&o.batch, "batch", 5_000, "spans per OTLP request")
	fs.IntVar(&o.wide, "wide", 200_000, "also open the large trace with this many spans shown (the API's most; 0: not)")
	fs.StringVar(&o.shot, "shot", "", "save a screenshot of the large trace's page in this directory")
	fs.StringVar(&o.bin, "bin", "", "the tracebridge binary (default: build ./cmd/tracebridge)")
	fs.StringVar(&o.chromium, "chromium", "", "the Chromium binary (default: chromium or chromium-browser on PATH)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (store, logs)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.spans < 2 || o.small < 2 || o.runs < 1 || o.events < 2 || o.batch < 1 {
		err := errors.New("-spans and -small at least 2, -runs 1, -events 2, -batch 1")
		fmt.Fprintln(stderr, err)
		return nil, err
	}
	return o, nil
}

// result is what one trace measured.
type result struct {
	name          string
	spans, shown  int
	send, stored  time.Duration   // sending it; from the first span sent until the store answers it whole
	apiView       time.Duration   // GET /view (10 000 spans) from Go, median
	open          []float64       // ms, navigation start to drawn, one per run
	fetch         []float64       // ms of the page's /view fetch(es)
	scroll, zoom  frames          // the timeline's
	tree          frames          // the call tree's
	tabs          []time.Duration // flame graph, ranking, critical path: click to drawn
	viewJSONBytes int
}

func run(ctx context.Context, o *options, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	tmp, err := os.MkdirTemp("", "tracebridge-web-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(out, "keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	bin := o.bin
	if bin == "" {
		fmt.Fprintln(out, "building tracebridge…")
		if bin, err = benchkit.Build(ctx, tmp); err != nil {
			return err
		}
	}
	b, err := startBridge(ctx, bin, tmp, o.spans+o.small)
	if err != nil {
		return err
	}
	defer b.stop()
	fmt.Fprintf(out, "tracebridge web benchmark: %s, GOMAXPROCS %d, %s, API %s\n", benchkit.GoVersion(bin), runtime.GOMAXPROCS(0), cpuName(), b.base)

	br, err := startBrowser(ctx, o.chromium)
	if err != nil {
		return err
	}
	defer br.close()

	var results []*result
	for _, tc := range []struct {
		name  string
		spans int
	}{{"small", o.small}, {"large", o.spans}} {
		r := &result{name: tc.name, spans: tc.spans, shown: min(tc.spans, 10_000)}
		id, err := sendTrace(ctx, b, r, o.batch, uint64(len(results)+1))
		if err != nil {
			return fmt.Errorf("%s trace: %w", tc.name, err)
		}
		fmt.Fprintf(out, "%s trace %s: %d spans sent in %v, stored whole after %v\n", tc.name, id, tc.spans, r.send.Round(time.Millisecond), r.stored.Round(time.Millisecond))
		if r.apiView, r.viewJSONBytes, err = timeView(ctx, b.base, id, 10_000); err != nil {
			return err
		}
		if err := br.measure(ctx, b.base, id, "", o, r); err != nil {
			return fmt.Errorf("%s trace in Chromium: %w", tc.name, err)
		}
		results = append(results, r)
		if tc.name == "large" && o.shot != "" {
			if err := br.screenshot(ctx, filepath.Join(o.shot, "trace-large.png")); err != nil {
				return err
			}
		}
		if tc.name == "large" && tc.spans > 10_000 && o.wide > 10_000 {
			// The same trace with up to -wide spans in the page: the tree
			// and the timeline virtualised over 10^5 rows.
			w := &result{name: "large, wide", spans: tc.spans, shown: min(tc.spans, o.wide), stored: r.stored}
			if w.apiView, w.viewJSONBytes, err = timeView(ctx, b.base, id, o.wide); err != nil {
				return err
			}
			if err := br.measure(ctx, b.base, id, fmt.Sprintf("?max=%d", o.wide), o, w); err != nil {
				return fmt.Errorf("%s trace, %d spans shown, in Chromium: %w", tc.name, o.wide, err)
			}
			results = append(results, w)
		}
	}
	if !report(out, o, results) {
		return fmt.Errorf("the %d-span trace opened in more than %v", o.spans, aimOpen)
	}
	return nil
}

// bridge is the running `tracebridge serve`.
type bridge struct {
	cmd       *exec.Cmd
	base      string // http://127.0.0.1:PORT
	otlp      string // host:port
	exited    chan struct{}
	stderr    *benchkit.Tail
	waitError error
}

func startBridge(ctx context.Context, bin, dir string, maxSpans int) (*bridge, error) {
	cfg := fmt.Sprintf(`flush_interval: 100ms
traces: {window: 500ms, max_spans: %d}
http: "127.0.0.1:0"
receivers:
  - {name: otlp, type: otlp-http, listen: "127.0.0.1:0"}
sinks:
  - {type: store, path: %q}
`, maxSpans+1000, filepath.Join(dir, "store"))
	path := filepath.Join(dir, "tracebridge.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	b := &bridge{exited: make(chan struct{}), stderr: benchkit.NewTail(64 << 10)}
	b.cmd = exec.CommandContext(ctx, bin, "serve", "-c", path)
	b.cmd.Dir = dir
	b.cmd.Stderr = b.stderr
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after the start
			}
		}
	}()
	go func() { b.waitError = b.cmd.Wait(); close(b.exited) }()
	timeout := time.After(benchkit.StartTimeout)
	for {
		select {
		case l := <-lines:
			l, _ = strings.CutPrefix(l, "tracebridge: ")
			if w, ok := strings.CutPrefix(l, "receiver otlp (otlp-http) listening on "); ok {
				b.otlp, _, _ = strings.Cut(w, " ")
			}
			if w, ok := strings.CutPrefix(l, "http on "); ok {
				w, _, _ = strings.Cut(w, " ")
				b.base = strings.TrimSuffix(w, "/")
			}
			if l == "ready" {
				if b.base == "" || b.otlp == "" {
					b.stop()
					return nil, fmt.Errorf("serve reported ready without its addresses (http %q, otlp %q)", b.base, b.otlp)
				}
				return b, nil
			}
		case <-b.exited:
			return nil, fmt.Errorf("tracebridge serve exited at start (%v): %s", b.waitError, b.stderr)
		case <-timeout:
			b.stop()
			return nil, fmt.Errorf("tracebridge serve did not report ready within %v: %s", benchkit.StartTimeout, b.stderr)
		}
	}
}

func (b *bridge) stop() {
	select {
	case <-b.exited:
		return
	default:
	}
	b.cmd.Process.Signal(os.Interrupt)
	select {
	case <-b.exited:
	case <-time.After(20 * time.Second):
		b.cmd.Process.Kill()
		<-b.exited
	}
}

// sendTrace generates a trace of r.spans spans, sends it and waits until
// the store answers it with every span; it returns the trace id.
func sendTrace(ctx context.Context, b *bridge, r *result, batch int, seed uint64) (string, error) {
	var tid [16]byte
	rand.Read(tid[:])
	g := newTraceGen(seed)
	spans := g.generate(r.spans, time.Now().Add(-time.Minute).UnixNano()-int64(r.spans)*40_000)
	reqs, err := encode(tid, spans, g.places, batch)
	if err != nil {
		return "", err
	}
	id := fmt.Sprintf("%x", tid)
	client := &http.Client{Timeout: time.Minute}
	start := time.Now()
	for i, body := range reqs {
		req, err := http.NewRequestWithContext(ctx, "POST", "http://"+b.otlp+"/v1/traces", strings.NewReader(string(body)))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := client.Do(req)
		if err != nil {
			return "", fmt.Errorf("request %d of %d: %w", i+1, len(reqs), err)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("request %d of %d: %s %s", i+1, len(reqs), resp.Status, msg)
		}
	}
	r.send = time.Since(start)
	for step := 50 * time.Millisecond; ; step = min(step*2, time.Second) {
		n, err := storedSpans(ctx, b.base, id)
		if err != nil {
			return "", err
		}
		if n == r.spans {
			break
		}
		if n > 0 && n != r.spans {
			return "", fmt.Errorf("the store holds %d spans of trace %s, %d were sent (is it in parts?)", n, id, r.spans)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for trace %s in the store: %w (%s)", id, ctx.Err(), b.stderr)
		case <-b.exited:
			return "", fmt.Errorf("tracebridge exited (%v): %s", b.waitError, b.stderr)
		case <-time.After(step):
		}
	}
	r.stored = time.Since(start)
	return id, nil
}

// storedSpans answers the spans the store holds of trace id (0: none
// yet).
func storedSpans(ctx context.Context, base, id string) (int, error) {
	var v struct {
		SpanCount int `json:"spanCount"`
	}
	code, err := getJSON(ctx, base+"/api/v1/traces/"+id+"/view?maxSpans=1", &v)
	if code == 404 {
		return 0, nil
	}
	return v.SpanCount, err
}

// timeView times the API's view of maxSpans spans of the trace from Go (no
// browser): the server's share of the open time.
func timeView(ctx context.Context, base, id string, maxSpans int) (time.Duration, int, error) {
	var ds []time.Duration
	n := 0
	for range 3 {
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/traces/%s/view?maxSpans=%d", base, id, maxSpans), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return 0, 0, fmt.Errorf("GET view: %v %s", err, resp.Status)
		}
		ds = append(ds, time.Since(t0))
		n = len(b)
	}
	return medianDur(ds), n, nil
}

func cpuName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for l := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// report prints the tables; it answers whether the large trace opened
// within aimOpen.
func report(out io.Writer, o *options, rs []*result) bool {
	met := true
	fmt.Fprintln(out)
	tw := benchkit.Table(out)
	fmt.Fprintln(tw, "trace\tspans\tshown\tstored\tAPI /view\topen (drawn)\tof it /view fetch\ttimeline scroll avg/p99\tzoom avg/p99\ttimeline draw p50/p99\ttree scroll avg/p99\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%v\t%.0f ms\t%.0f ms\t%s\t%s\t%.1f/%.1f ms\t%s\t\n", r.name, r.spans, r.shown, r.stored.Round(time.Millisecond),
			r.apiView.Round(time.Millisecond), median(r.open), median(r.fetch), r.scroll, r.zoom,
			pct(append(slices.Clone(r.scroll.draw), r.zoom.draw...), 50), pct(append(slices.Clone(r.scroll.draw), r.zoom.draw...), 99), r.tree)
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = benchkit.Table(out)
	fmt.Fprintln(tw, "trace\tshown\tflame graph tab\tranking tab\tcritical path tab\t")
	for _, r := range rs {
		if len(r.tabs) == 3 {
			fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%v\t\n", r.name, r.shown, r.tabs[0].Round(time.Millisecond), r.tabs[1].Round(time.Millisecond), r.tabs[2].Round(time.Millisecond))
		}
	}
	tw.Flush()
	if len(rs) >= 2 {
		s, l := rs[0], rs[1]
		fmt.Fprintf(out, "\nlarge/small: %.0f× the spans; open %.2f×, API view %.2f×, timeline frame p99 %.2f×, tree frame p99 %.2f×\n",
			float64(l.spans)/float64(s.spans), median(l.open)/median(s.open), float64(l.apiView)/float64(s.apiView),
			pct(l.zoom.interval, 99)/pct(s.zoom.interval, 99), pct(l.tree.interval, 99)/pct(s.tree.interval, 99))
		met = time.Duration(median(l.open)*float64(time.Millisecond)) <= aimOpen
		verdict := "met"
		if !met {
			verdict = "NOT met"
		}
		fmt.Fprintf(out, "aim: a %d-span trace opens within %v: %s (%.0f ms; view JSON %d KiB)\n", l.spans, aimOpen, verdict, median(l.open), l.viewJSONBytes>>10)
	}
	fmt.Fprintf(out, "open: median of %d; frames: %d events, one per animation frame (16.7 ms = 60 Hz)\n", o.runs, o.events)
	return met
}
