package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Names in the bridge's configuration.
const (
	receiverName = "in"
	sinkName     = "log"
)

// Polling of the metrics endpoint: while the clients send, and once they
// are done (a finer step there bounds the error of the stop time).
const (
	pollSending  = 20 * time.Millisecond
	pollDraining = 5 * time.Millisecond
	// stallTimeout ends a run whose sink count has not moved for this long
	// after the clients finished.
	stallTimeout = 15 * time.Second
)

// bridge is one running `tracebridge serve`.
type bridge struct {
	cmd     *exec.Cmd
	addr    string // the receiver's address
	metrics string // the metrics URL
	logDir  string // the Kieker log directory the sink writes
	stderr  *tail
	exited  chan struct{}
	waitErr error
	client  *http.Client
}

// receiverType is the serve receiver type that speaks a dialect.
func receiverType(dialect string) string {
	if dialect == dialectKieker {
		return "kieker-tcp"
	}
	return "tcp-server"
}

// startBridge writes a configuration under dir (one receiver of the
// dialect on a free port, a binary Kieker log under dir/log, metrics on a
// free port) and starts bin serve with it. It returns once the bridge has
// printed its receiver, sink and metrics addresses.
func startBridge(ctx context.Context, bin, dialect, dir string) (*bridge, error) {
	cfg := fmt.Sprintf(`data_dir: %q
metrics: "127.0.0.1:0"
receivers:
  - name: %s
    type: %s
    listen: "127.0.0.1:0"
sinks:
  - name: %s
    type: kieker-log
    format: binary
    path: %q
`, dir, receiverName, receiverType(dialect), sinkName, filepath.Join(dir, "log"))
	cfgPath := filepath.Join(dir, "tracebridge.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	b := &bridge{stderr: &tail{max: 64 << 10}, exited: make(chan struct{}), client: &http.Client{Timeout: 5 * time.Second}}
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
	timeout := time.After(15 * time.Second)
	for b.addr == "" || b.metrics == "" || b.logDir == "" {
		select {
		case l := <-lines:
			b.parseLine(l)
		case <-b.exited:
			return nil, fmt.Errorf("tracebridge serve exited at start (%v): %s", b.waitErr, b.stderr)
		case <-timeout:
			b.kill()
			return nil, fmt.Errorf("tracebridge serve did not report its addresses within 15 s: %s", b.stderr)
		}
	}
	return b, nil
}

// parseLine takes the addresses from serve's start-up lines:
//
//	tracebridge: receiver NAME (TYPE) listening on ADDR
//	tracebridge: sink NAME (TYPE) writing to DIR
//	tracebridge: metrics on http://ADDR/metrics
func (b *bridge) parseLine(l string) {
	l, ok := strings.CutPrefix(l, "tracebridge: ")
	if !ok {
		return
	}
	switch {
	case strings.HasPrefix(l, "receiver "+receiverName+" "):
		if _, addr, ok := strings.Cut(l, " listening on "); ok {
			b.addr = addr
		}
	case strings.HasPrefix(l, "sink "+sinkName+" "):
		if _, dir, ok := strings.Cut(l, " writing to "); ok {
			b.logDir = dir
		}
	case strings.HasPrefix(l, "metrics on "):
		b.metrics = strings.TrimPrefix(l, "metrics on ")
	}
}

// sinkRecords asks the metrics endpoint how many records the sink has
// consumed.
func (b *bridge) sinkRecords() (int64, error) {
	resp, err := b.client.Get(b.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", b.metrics, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", b.metrics, resp.Status)
	}
	v, ok := counter(body, "tracebridge_sink_records_total", `sink="`+sinkName+`"`)
	if !ok {
		return 0, fmt.Errorf("%s: no tracebridge_sink_records_total sample for sink %s", b.metrics, sinkName)
	}
	return int64(v), nil
}

// counter finds the sample of metric name whose labels include label in a
// Prometheus text exposition and returns its value.
func counter(body []byte, name, label string) (float64, bool) {
	for len(body) > 0 {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte("\n"))
		rest, ok := bytes.CutPrefix(line, []byte(name))
		if !ok || len(rest) == 0 {
			continue
		}
		switch rest[0] {
		case '{':
			end := bytes.IndexByte(rest, '}')
			if end < 0 || !bytes.Contains(rest[:end], []byte(label)) {
				continue
			}
			rest = rest[end+1:]
		case ' ':
			if label != "" {
				continue
			}
		default: // a longer metric name
			continue
		}
		f := strings.Fields(string(rest)) // value [timestamp]
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		return v, true
	}
	return 0, false
}

// stop sends SIGTERM, waits for the bridge to exit (killing it after a
// minute) and returns the CPU time it used over its whole life.
func (b *bridge) stop() (time.Duration, error) {
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-b.exited:
	case <-time.After(time.Minute):
		b.kill()
		<-b.exited
		return 0, fmt.Errorf("tracebridge serve did not exit within a minute of SIGTERM: %s", b.stderr)
	}
	st := b.cmd.ProcessState
	if b.waitErr != nil {
		return 0, fmt.Errorf("tracebridge serve: %v: %s", b.waitErr, b.stderr)
	}
	return st.UserTime() + st.SystemTime(), nil
}

// kill ends the bridge without waiting for a clean shutdown.
func (b *bridge) kill() {
	select {
	case <-b.exited:
	default:
		b.cmd.Process.Kill()
	}
}

// tail is an io.Writer that keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns what was kept, or a note that nothing was written.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return "(no output on stderr)"
	}
	return "stderr:\n" + s
}

// errStalled reports a bridge whose sink stopped short of the records sent.
var errStalled = errors.New("the sink count stopped short of the records sent")
