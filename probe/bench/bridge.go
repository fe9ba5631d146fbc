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

// bridge is one running `tracebridge serve` with a kieker-tcp receiver
// named "in" and a binary Kieker log sink.
type bridge struct {
	cmd     *exec.Cmd
	addr    string // the receiver's address
	metrics string // the metrics URL
	stderr  *tail
	exited  chan struct{}
	waitErr error
}

// buildBridge builds ./cmd/tracebridge of the module containing the
// working directory into dir.
func buildBridge(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "tracebridge")
	cmd := exec.Command(goTool(), "build", "-o", bin, "./cmd/tracebridge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tracebridge in %s: %v\n%s", root, err, out)
	}
	return bin, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/tracebridge/tracebridge\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the tracebridge module (no go.mod found); pass -bin")
		}
		dir = parent
	}
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// startBridge starts bin serve with a configuration written into dir and
// returns once it has printed its receiver and metrics addresses.
func startBridge(bin, dir string) (*bridge, error) {
	cfg := fmt.Sprintf(`data_dir: %q
metrics: "127.0.0.1:0"
receivers:
  - {name: in, type: kieker-tcp, listen: "127.0.0.1:0"}
sinks:
  - {name: log, type: kieker-log, format: binary, path: %q}
`, dir, filepath.Join(dir, "log"))
	cfgPath := filepath.Join(dir, "tracebridge.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	b := &bridge{stderr: &tail{max: 16 << 10}, exited: make(chan struct{})}
	b.cmd = exec.Command(bin, "serve", "-c", cfgPath)
	b.cmd.Stderr = b.stderr
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.exited)
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				<-b.exited
				return nil, fmt.Errorf("tracebridge serve exited at start (%v): %s", b.waitErr, b.stderr)
			}
			l, _ = strings.CutPrefix(l, "tracebridge: ")
			if a, ok := strings.CutPrefix(l, "receiver in (kieker-tcp) listening on "); ok {
				b.addr = a
			}
			if m, ok := strings.CutPrefix(l, "metrics on "); ok {
				b.metrics = m
			}
			if l == "ready" {
				if b.addr == "" || b.metrics == "" {
					b.kill()
					return nil, fmt.Errorf("tracebridge serve printed no receiver or metrics address: %s", b.stderr)
				}
				go func() {
					for range lines {
					}
				}()
				return b, nil
			}
		case <-timeout:
			b.kill()
			return nil, fmt.Errorf("tracebridge serve was not ready within 30 s: %s", b.stderr)
		}
	}
}

// received returns the number of records the receiver has decoded, from
// the metrics endpoint.
func (b *bridge) received(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.metrics, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum int64
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "tracebridge_records_received_total{")
		if !ok || !strings.Contains(rest, `receiver="in"`) {
			continue
		}
		f := strings.Fields(rest[strings.IndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", b.metrics, line, err)
		}
		sum += int64(v)
	}
	return sum, nil
}

// waitReceived waits until the receiver has decoded n records, or 60 s.
func (b *bridge) waitReceived(n int64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		got, err := b.received(ctx)
		if err == nil && got >= n {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("the bridge decoded %d records, want %d (%v)", got, n, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (b *bridge) stop() error {
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-b.exited:
	case <-time.After(time.Minute):
		b.kill()
		return fmt.Errorf("tracebridge serve did not exit within a minute of SIGTERM: %s", b.stderr)
	}
	if b.waitErr != nil {
		return fmt.Errorf("tracebridge serve: %v: %s", b.waitErr, b.stderr)
	}
	return nil
}

func (b *bridge) kill() {
	select {
	case <-b.exited:
	default:
		b.cmd.Process.Kill()
		<-b.exited
	}
}

// tail keeps the last max bytes written to it.
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

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := strings.TrimSpace(string(t.buf)); s != "" {
		return "stderr:\n" + s
	}
	return "(no output on stderr)"
}
