package bridgetest

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/logtest"
)

// How long Start waits for "tracebridge: ready" and Wait for the exit.
const (
	ReadyTimeout = 30 * time.Second
	ExitTimeout  = 60 * time.Second
)

const readyLine = "tracebridge: ready"

// The lines `tracebridge serve` prints before it is ready.
var (
	receiverLine = regexp.MustCompile(`^tracebridge: receiver (\S+) \(\S+\) (?:listening on|connecting to|consuming from) (\S+)`)
	sinkLine     = regexp.MustCompile(`^tracebridge: sink \S+ \(kieker-log\) writing to (\S+)`)
	metricsLine  = regexp.MustCompile(`^tracebridge: metrics on http://(\S+)/metrics`)
)

// Process is a running `tracebridge serve`.
type Process struct {
	// Dir is the working directory.
	Dir string
	// Receivers maps each receiver's name to the first address on its
	// line: where it listens, connects to or consumes from.
	Receivers map[string]string
	// LogDir is the directory of the first kieker-log sink ("" without
	// one), made absolute against Dir.
	LogDir string
	// Metrics is the host:port of the metrics endpoint ("" without one).
	Metrics string

	tb             testing.TB
	cmd            *exec.Cmd
	stdout, stderr logtest.Buffer
	done           chan struct{} // closed once the process is reaped
	code           int           // its exit code, once done is closed
}

// Start runs `tracebridge serve args…` in dir and waits until it prints
// "tracebridge: ready"; it fails tb when the bridge exits or takes longer
// than ReadyTimeout. The test's cleanup kills the bridge if it still runs.
func Start(tb testing.TB, dir string, args ...string) *Process {
	tb.Helper()
	p := &Process{Dir: dir, Receivers: map[string]string{}, tb: tb, done: make(chan struct{})}
	p.cmd = exec.Command(Binary(tb), append([]string{"serve"}, args...)...)
	p.cmd.Dir = dir
	pr, pw := io.Pipe()
	// The buffer first: once the reader below sees "ready", the buffer
	// holds every line before it.
	p.cmd.Stdout = io.MultiWriter(&p.stdout, pw)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("starting tracebridge serve: %v", err)
	}
	ready := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if sc.Text() == readyLine {
				close(ready)
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		pw.Close()
		<-scanned
		close(p.done)
	}()
	tb.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case <-ready:
	case <-p.done:
		select {
		case <-ready:
		default:
			tb.Fatalf("tracebridge serve %v exited with %d before it was ready; stderr:\n%s", args, p.code, p.Stderr())
		}
	case <-time.After(ReadyTimeout):
		tb.Fatalf("tracebridge serve %v not ready after %v; stderr:\n%s", args, ReadyTimeout, p.Stderr())
	}
	p.parse()
	return p
}

// StartConfig writes yaml to tracebridge.yaml in a new temporary directory
// and runs `tracebridge serve -c tracebridge.yaml args…` there.
func StartConfig(tb testing.TB, yaml string, args ...string) *Process {
	tb.Helper()
	dir := tb.TempDir()
	return Start(tb, dir, append([]string{"-c", WriteConfig(tb, dir, yaml)}, args...)...)
}

// WriteConfig writes yaml to dir/tracebridge.yaml and returns its path.
func WriteConfig(tb testing.TB, dir, yaml string) string {
	tb.Helper()
	p := filepath.Join(dir, "tracebridge.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// LogConfig returns a configuration with the given receivers (YAML flow
// mappings such as `{name: c, type: kieker-tcp, listen: "127.0.0.1:0"}`),
// a 100 ms flush interval and one kieker-log sink writing to logs.
func LogConfig(receivers ...string) string {
	var b strings.Builder
	b.WriteString("flush_interval: 100ms\nreceivers:\n")
	for _, r := range receivers {
		b.WriteString("  - " + r + "\n")
	}
	b.WriteString("sinks:\n  - {type: kieker-log, path: logs}\n")
	return b.String()
}

// parse reads the lines before "ready" (all in the buffer by then).
func (p *Process) parse() {
	for _, line := range strings.Split(p.Stdout(), "\n") {
		if line == readyLine {
			return
		}
		if m := receiverLine.FindStringSubmatch(line); m != nil {
			p.Receivers[m[1]] = m[2]
		}
		if m := metricsLine.FindStringSubmatch(line); m != nil {
			p.Metrics = m[1]
		}
		if m := sinkLine.FindStringSubmatch(line); m != nil && p.LogDir == "" {
			p.LogDir = m[1]
			if !filepath.IsAbs(p.LogDir) {
				p.LogDir = filepath.Join(p.Dir, p.LogDir)
			}
		}
	}
}

// Addr returns the address the receiver name printed; it fails the test
// when there is none.
func (p *Process) Addr(name string) string {
	p.tb.Helper()
	a := p.Receivers[name]
	if a == "" {
		p.tb.Fatalf("tracebridge serve printed no address for receiver %s; stdout:\n%s", name, p.Stdout())
	}
	return a
}

// Port returns the port of the address the receiver name printed.
func (p *Process) Port(name string) string {
	p.tb.Helper()
	_, port, err := net.SplitHostPort(p.Addr(name))
	if err != nil {
		p.tb.Fatalf("receiver %s: %v", name, err)
	}
	return port
}

// Stdout returns what the bridge has written to stdout so far.
func (p *Process) Stdout() string { return p.stdout.String() }

// Stderr returns what the bridge has written to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// Stop sends SIGTERM and waits for a clean exit (which flushes the logs).
func (p *Process) Stop() {
	p.tb.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.Wait(0)
}

// Wait waits up to ExitTimeout for the bridge to exit and fails the test
// unless it exits with code.
func (p *Process) Wait(code int) {
	p.tb.Helper()
	select {
	case <-p.done:
	case <-time.After(ExitTimeout):
		p.tb.Fatalf("tracebridge serve did not exit; stderr:\n%s", p.Stderr())
	}
	if p.code != code {
		p.tb.Fatalf("tracebridge serve exited with %d, want %d; stderr:\n%s", p.code, code, p.Stderr())
	}
}

// Signal sends sig to the bridge.
func (p *Process) Signal(sig os.Signal) {
	p.cmd.Process.Signal(sig)
}

// Done is closed once the bridge has exited; ExitCode then returns its
// code.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode returns the exit code of the bridge, -1 when a signal ended it;
// call it after Done is closed.
func (p *Process) ExitCode() int {
	<-p.done
	return p.code
}

// Kill ends the bridge with SIGKILL and waits until it is gone.
func (p *Process) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Pid returns the process id of the bridge.
func (p *Process) Pid() int { return p.cmd.Process.Pid }
