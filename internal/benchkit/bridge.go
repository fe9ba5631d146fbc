package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Names in the configuration Start writes.
const (
	ReceiverName = "in"
	SinkName     = "log"
)

// StartTimeout bounds how long Start waits for serve to report ready.
const StartTimeout = 15 * time.Second

// Polling of the metrics endpoint: every pollMax at most, every pollMin at
// least, and in between every 1/pollShare of the time elapsed.
const (
	pollMin   = 2 * time.Millisecond
	pollMax   = 20 * time.Millisecond
	pollShare = 200
)

// PollStep is how long to wait before the next poll of the metrics
// endpoint, elapsed into a run: the stop time is then at most 0.5 % (at
// least 2 ms, at most 20 ms) late, while a long run is not slowed by the
// polls (each one makes the bridge render its metrics).
func PollStep(elapsed time.Duration) time.Duration {
	return min(pollMax, max(pollMin, elapsed/pollShare))
}

// Bridge is one running `tracebridge serve`.
type Bridge struct {
	// Set by Start; read-only afterwards.
	Addr    string // the receiver's address (host:port), or its broker target
	Metrics string // the metrics URL
	LogDir  string // the Kieker log directory the sink writes

	ready   bool
	cmd     *exec.Cmd
	stderr  *Tail
	exited  chan struct{}
	waitErr error
	client  *http.Client
}

// Start writes a configuration under dir (receiver ReceiverName with the
// settings receiver, a binary Kieker log sink SinkName under dir/log,
// metrics on a free port) and starts bin serve with it. receiver is the
// receiver's YAML settings, each line indented by four spaces and ending
// in a newline, for example
//
//	"    type: tcp-server\n    listen: \"127.0.0.1:0\"\n"
//
// Start returns once serve has printed its addresses and "ready"; ctx
// kills the bridge when it is done.
func Start(ctx context.Context, bin, dir, receiver string) (*Bridge, error) {
	return StartSinks(ctx, bin, dir, receiver, "")
}

// StoreSink is the YAML of a trace store sink StoreName under dir/store,
// for StartSinks: the sink the embedded default adds to the log.
func StoreSink(dir string) string {
	return fmt.Sprintf("  - name: %s\n    type: store\n    path: %q\n", StoreName, filepath.Join(dir, "store"))
}

// StoreName names the store sink of StoreSink.
const StoreName = "store"

// StartSinks is Start with more sinks after the log: sinks is their YAML
// list entries, each line ending in a newline (StoreSink).
func StartSinks(ctx context.Context, bin, dir, receiver, sinks string) (*Bridge, error) {
	cfg := fmt.Sprintf(`data_dir: %q
metrics: "127.0.0.1:0"
receivers:
  - name: %s
%ssinks:
  - name: %s
    type: kieker-log
    format: binary
    path: %q
%s`, dir, ReceiverName, receiver, SinkName, filepath.Join(dir, "log"), sinks)
	cfgPath := filepath.Join(dir, "tracebridge.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	b := &Bridge{stderr: NewTail(64 << 10), exited: make(chan struct{}), client: &http.Client{
		Timeout: 5 * time.Second,
		// Uncompressed: gzipping the exposition at every poll would cost
		// the bridge more CPU than some of the runs measure.
		Transport: &http.Transport{DisableCompression: true},
	}}
	b.cmd = exec.CommandContext(ctx, bin, "serve", "-c", cfgPath)
	b.cmd.Stderr = b.stderr
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	lines := make(chan string, 16)
	started := make(chan struct{})
	defer close(started)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-started: // nobody reads lines after the start
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.exited)
	}()
	timeout := time.After(StartTimeout)
	for !b.ready {
		select {
		case l := <-lines:
			b.parseLine(l)
		case <-b.exited:
			return nil, fmt.Errorf("tracebridge serve exited at start (%v): %s", b.waitErr, b.stderr)
		case <-timeout:
			b.Kill()
			return nil, fmt.Errorf("tracebridge serve did not report ready within %v: %s", StartTimeout, b.stderr)
		}
	}
	if b.Addr == "" || b.Metrics == "" || b.LogDir == "" {
		b.Kill()
		return nil, fmt.Errorf("tracebridge serve reported ready without its addresses (receiver %q, metrics %q, log %q)",
			b.Addr, b.Metrics, b.LogDir)
	}
	return b, nil
}

// parseLine takes the addresses from serve's start-up lines:
//
//	tracebridge: receiver NAME (TYPE) listening on ADDR
//	tracebridge: receiver NAME (broker-embedded) listening on nats://ADDR [and mqtt://ADDR]
//	tracebridge: receiver NAME (stomp-client) consuming from TARGET
//	tracebridge: sink NAME (TYPE) writing to DIR
//	tracebridge: metrics on http://ADDR/metrics
//	tracebridge: ready
func (b *Bridge) parseLine(l string) {
	l, ok := strings.CutPrefix(l, "tracebridge: ")
	if !ok {
		return
	}
	switch {
	case strings.HasPrefix(l, "receiver "+ReceiverName+" "):
		for _, verb := range []string{" listening on ", " consuming from "} {
			if _, where, ok := strings.Cut(l, verb); ok {
				where, _, _ = strings.Cut(where, " ")
				b.Addr = strings.TrimPrefix(where, "nats://")
			}
		}
	case strings.HasPrefix(l, "sink "+SinkName+" "):
		if _, dir, ok := strings.Cut(l, " writing to "); ok {
			b.LogDir = dir
		}
	case strings.HasPrefix(l, "metrics on "):
		b.Metrics = strings.TrimPrefix(l, "metrics on ")
	case l == "ready":
		b.ready = true
	}
}

// Pid returns the bridge's process id.
func (b *Bridge) Pid() int { return b.cmd.Process.Pid }

// Exited is closed once the bridge process has exited.
func (b *Bridge) Exited() <-chan struct{} { return b.exited }

// WaitErr returns how the bridge exited (nil for status 0); it may only be
// called once Exited is closed.
func (b *Bridge) WaitErr() error { return b.waitErr }

// Stderr returns the tail of the bridge's standard error.
func (b *Bridge) Stderr() *Tail { return b.stderr }

// SinkRecords asks the metrics endpoint how many records the sink has
// consumed (tracebridge_sink_records_total{sink="log"}).
func (b *Bridge) SinkRecords() (int64, error) {
	body, err := b.metricsPage()
	if err != nil {
		return 0, err
	}
	v, ok := counter(body, "tracebridge_sink_records_total", `sink="`+SinkName+`"`)
	if !ok {
		return 0, fmt.Errorf("%s: no tracebridge_sink_records_total sample for sink %s", b.Metrics, SinkName)
	}
	return int64(v), nil
}

// TraceRecords asks the metrics endpoint how many records the trace
// assembler has taken (tracebridge_trace_records_total; 0 without one).
func (b *Bridge) TraceRecords() (int64, error) {
	body, err := b.metricsPage()
	if err != nil {
		return 0, err
	}
	v, _ := counter(body, "tracebridge_trace_records_total", "")
	return int64(v), nil
}

// ReceivedRecords asks the metrics endpoint how many records the receiver
// has decoded (tracebridge_records_received_total{receiver="in"}, summed
// over the record types).
func (b *Bridge) ReceivedRecords() (int64, error) {
	body, err := b.metricsPage()
	if err != nil {
		return 0, err
	}
	var sum float64
	label := `receiver="` + ReceiverName + `"`
	for rest := body; ; {
		v, ok, after := nextSample(rest, "tracebridge_records_received_total", label)
		if !ok {
			break
		}
		sum, rest = sum+v, after
	}
	return int64(sum), nil
}

// metricsPage fetches the metrics endpoint's text exposition.
func (b *Bridge) metricsPage() ([]byte, error) {
	resp, err := b.client.Get(b.Metrics)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Metrics, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", b.Metrics, resp.Status)
	}
	return body, nil
}

// counter finds the sample of metric name whose labels include label in a
// Prometheus text exposition and returns its value.
func counter(body []byte, name, label string) (float64, bool) {
	v, ok, _ := nextSample(body, name, label)
	return v, ok
}

// nextSample finds the first sample of metric name whose labels include
// label in body and returns its value and the rest of body after it.
func nextSample(body []byte, name, label string) (v float64, ok bool, rest []byte) {
	for len(body) > 0 {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte("\n"))
		r, ok := bytes.CutPrefix(line, []byte(name))
		if !ok || len(r) == 0 {
			continue
		}
		switch r[0] {
		case '{':
			end := bytes.IndexByte(r, '}')
			if end < 0 || !bytes.Contains(r[:end], []byte(label)) {
				continue
			}
			r = r[end+1:]
		case ' ':
			if label != "" {
				continue
			}
		default: // a longer metric name
			continue
		}
		f := strings.Fields(string(r)) // value [timestamp]
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		return v, true, body
	}
	return 0, false, nil
}

// Stop sends SIGTERM, waits for the bridge to exit (killing it after a
// minute) and returns the CPU time it used over its whole life. An exit
// status other than 0 is an error.
func (b *Bridge) Stop() (time.Duration, error) {
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-b.exited:
	case <-time.After(time.Minute):
		b.Kill()
		return 0, fmt.Errorf("tracebridge serve did not exit within a minute of SIGTERM: %s", b.stderr)
	}
	if b.waitErr != nil {
		return 0, fmt.Errorf("tracebridge serve: %v: %s", b.waitErr, b.stderr)
	}
	st := b.cmd.ProcessState
	return st.UserTime() + st.SystemTime(), nil
}

// Kill ends the bridge without a clean shutdown and waits until it has
// exited. It does nothing once the bridge has exited (after Stop, say).
func (b *Bridge) Kill() {
	select {
	case <-b.exited:
		return
	default:
		b.cmd.Process.Kill()
	}
	<-b.exited
}

// Build compiles ./cmd/tracebridge of the module that holds the working
// directory into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command to build tracebridge with (give -bin): %w", err)
	}
	bin := filepath.Join(dir, "tracebridge")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./cmd/tracebridge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tracebridge in %s: %v\n%s", root, err, out)
	}
	return bin, nil
}

// moduleRoot walks up from the working directory to the directory with
// go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run from the tracebridge module or give -bin")
		}
		dir = parent
	}
}

// GoVersion returns the Go version the binary bin was built with, or
// "unknown".
func GoVersion(bin string) string {
	if bi, err := buildinfo.ReadFile(bin); err == nil {
		return bi.GoVersion
	}
	return "unknown"
}

// metricClient is Metric's: uncompressed (gzipping the page at every
// poll would cost the polled server CPU; see SinkRecords), keep-alive.
var metricClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}

// Metric fetches the metrics endpoint at addr (host:port) and returns the
// value of the sample of metric name whose labels include label (e.g.
// `sink="log"`); ok is false when there is no such sample.
func Metric(addr, name, label string) (v float64, ok bool, err error) {
	b := &Bridge{Metrics: "http://" + addr + "/metrics", client: metricClient}
	body, err := b.metricsPage()
	if err != nil {
		return 0, false, err
	}
	v, ok = counter(body, name, label)
	return v, ok, nil
}
