// Package jfrtest runs real JVMs for the JFR tests and the benchmark: it
// finds the JDK's tools, compiles the Java workload (Workload.java: it
// allocates, sleeps, contends on monitors, throws, does file and socket
// I/O and emits
// custom events shop.Order, shop.Checkout and shop.Tick), records it, and
// asks the JDK's own jfr tool for the reference answers (jfr summary's
// counts, jfr print --json's values).
//
// A test that needs Java calls Require: when java, javac or jfr is not
// installed the test is skipped, unless TRACEBRIDGE_REQUIRE_SERVICES is
// set, in which case it fails.
package jfrtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

//go:embed Workload.java
var workloadSource []byte

//go:embed small.jfc
var smallSettings []byte

// Small is the Settings value for small.jfc: a few event types only
// (execution samples, sleeps, monitor enters, errors, heap summaries, CPU
// load, shop.Order and shop.Tick), for recordings small enough to commit.
const Small = "small"

// Tools are the paths of the JDK's programs.
type Tools struct {
	Java, Javac, JFR string
}

// JDKEnv names an environment variable that selects another JDK for the
// tests (its home directory, e.g. /usr/lib/jvm/temurin-25-jdk-amd64).
const JDKEnv = "TRACEBRIDGE_JFR_JDK"

// Find looks the JDK's programs up in $TRACEBRIDGE_JFR_JDK/bin when that
// is set, else in PATH.
func Find() (Tools, error) {
	var t Tools
	var missing []string
	home := os.Getenv(JDKEnv)
	for _, p := range []struct {
		name string
		dst  *string
	}{{"java", &t.Java}, {"javac", &t.Javac}, {"jfr", &t.JFR}} {
		name := p.name
		if home != "" {
			name = filepath.Join(home, "bin", name)
		}
		path, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, p.name)
			continue
		}
		*p.dst = path
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("%s not found in PATH", strings.Join(missing, ", "))
	}
	return t, nil
}

// Require returns the JDK's tools, or skips the test when they are not
// installed (fails it when TRACEBRIDGE_REQUIRE_SERVICES is set).
func Require(tb testing.TB) Tools {
	tb.Helper()
	t, err := Find()
	if err == nil {
		return t
	}
	if os.Getenv("TRACEBRIDGE_REQUIRE_SERVICES") != "" {
		tb.Fatalf("Java is required: %v; TRACEBRIDGE_REQUIRE_SERVICES is set", err)
	}
	tb.Skipf("Java is not installed: %v", err)
	return t
}

var compileMu sync.Mutex

// Compile compiles the workload once per source version into a directory
// under the system's temporary directory and returns it (the class path).
// Concurrent test binaries share it: the classes are compiled into a
// private directory that is renamed into place.
func (t Tools) Compile() (string, error) {
	compileMu.Lock()
	defer compileMu.Unlock()
	sum := sha256.Sum256(append([]byte(t.Javac+"\x00"), workloadSource...))
	dir := filepath.Join(os.TempDir(), "tracebridge-jfr-workload-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "Workload.class")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "tracebridge-jfr-workload-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "Workload.java")
	if err := os.WriteFile(src, workloadSource, 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command(t.Javac, "-d", filepath.Join(tmp, "classes"), src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("javac: %v\n%s", err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "classes"), dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "Workload.class")); statErr == nil {
			return dir, nil // another process won the race
		}
		return "", err
	}
	return dir, nil
}

// Options configure a JVM running the workload.
type Options struct {
	Seconds int // how long the workload runs at most (default 3)
	// UntilFinish: the workload also ends, normally, at JVM.Finish.
	UntilFinish bool
	// OneChunk: the workload does not make the JVM begin new chunks (by
	// default a run of 3 seconds or more does, after its first tick).
	OneChunk bool
	RunID    string // shop.Order.run and shop.Tick.run (default "run")
	Scale    int    // worker threads multiplier (default 1)
	// Filename makes JFR write the recording there at exit.
	Filename string
	// Repository sets -XX:FlightRecorderOptions:repository.
	Repository string
	// MaxChunkSize, e.g. "1M" (default the JVM's, 12 MB).
	MaxChunkSize string
	// Settings is the JFR configuration (default "profile").
	Settings string
	// Extra are more -XX:StartFlightRecording options ("jdk.X#enabled=true").
	Extra []string
}

// Recording options every test run uses besides the settings: exceptions
// and all file and socket I/O are recorded.
var defaultExtra = []string{
	"jdk.JavaExceptionThrow#enabled=true",
	"jdk.FileRead#threshold=0ms",
	"jdk.FileWrite#threshold=0ms",
	"jdk.SocketRead#threshold=0ms",
	"jdk.SocketWrite#threshold=0ms",
}

// JVM is a running workload.
type JVM struct {
	Cmd    *exec.Cmd
	ticks  chan int
	stdin  io.WriteCloser // UntilFinish: closed by Finish
	done   chan struct{}
	err    error
	stderr strings.Builder
}

// Start starts the workload.
func (t Tools) Start(classpath string, o Options) (*JVM, error) {
	if o.Seconds <= 0 {
		o.Seconds = 3
	}
	if o.RunID == "" {
		o.RunID = "run"
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.Settings == "" {
		o.Settings = "profile"
	}
	extra := defaultExtra
	cleanup := func() {}
	if o.Settings == Small {
		f, err := os.CreateTemp("", "tracebridge-small-*.jfc")
		if err != nil {
			return nil, err
		}
		cleanup = func() { os.Remove(f.Name()) }
		if _, err := f.Write(smallSettings); err != nil {
			f.Close()
			return nil, err
		}
		f.Close()
		o.Settings, extra = f.Name(), nil
	}
	rec := []string{"settings=" + o.Settings}
	if o.Filename != "" {
		rec = append(rec, "filename="+o.Filename)
	}
	rec = append(rec, extra...)
	rec = append(rec, o.Extra...)
	args := []string{"-XX:StartFlightRecording:" + strings.Join(rec, ",")}
	var fro []string
	if o.Repository != "" {
		fro = append(fro, "repository="+o.Repository)
	}
	if o.MaxChunkSize != "" {
		fro = append(fro, "maxchunksize="+o.MaxChunkSize)
	}
	if len(fro) > 0 {
		args = append(args, "-XX:FlightRecorderOptions:"+strings.Join(fro, ","))
	}
	if o.UntilFinish {
		args = append(args, "-Dworkload.untilFinish=true")
	}
	if o.OneChunk {
		args = append(args, "-Dworkload.oneChunk=true")
	}
	args = append(args, "-Xlog:disable", "-Xlog:all=error:stderr", "-cp", classpath, "Workload",
		strconv.Itoa(o.Seconds), o.RunID, strconv.Itoa(o.Scale))
	cmd := exec.Command(t.Java, args...)
	j := &JVM{Cmd: cmd, ticks: make(chan int, 1024), done: make(chan struct{})}
	cmd.Stderr = &j.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if o.UntilFinish {
		if j.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		cleanup()
		return nil, err
	}
	go func() {
		defer cleanup()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "tick "); ok {
				if v, err := strconv.Atoi(n); err == nil {
					select {
					case j.ticks <- v:
					default:
					}
				}
			}
		}
		j.err = cmd.Wait()
		close(j.done)
	}()
	return j, nil
}

// Finish asks a workload started with UntilFinish to end as it ends after
// Seconds (its main method returns: exit status 0, JFR finishes the
// recording and deletes its repository); Wait waits for it.
func (j *JVM) Finish() error {
	if j.stdin == nil {
		return errors.New("jfrtest: Finish of a workload started without UntilFinish")
	}
	return j.stdin.Close()
}

// Running reports whether the JVM has not exited yet.
func (j *JVM) Running() bool {
	select {
	case <-j.done:
		return false
	default:
		return true
	}
}

// Ticks receives the workload's second counter as it prints it.
func (j *JVM) Ticks() <-chan int { return j.ticks }

// Wait waits for the JVM to exit, at most d.
func (j *JVM) Wait(d time.Duration) error {
	select {
	case <-j.done:
		if j.err != nil {
			return fmt.Errorf("java: %v\n%s", j.err, j.stderr.String())
		}
		return nil
	case <-time.After(d):
		j.Cmd.Process.Kill()
		<-j.done
		return fmt.Errorf("java did not exit within %v", d)
	}
}

// Kill ends the JVM with SIGKILL (its repository stays behind) and waits.
func (j *JVM) Kill() {
	j.Cmd.Process.Kill()
	<-j.done
}

// Stop ends the JVM with SIGTERM (it stops the recording and deletes its
// repository) and waits.
func (j *JVM) Stop() {
	j.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-j.done:
	case <-time.After(20 * time.Second):
		j.Kill()
	}
}

// Record runs the workload to completion and returns the recording's path
// (o.Filename, or a file in dir).
func (t Tools) Record(dir string, o Options) (string, error) {
	cp, err := t.Compile()
	if err != nil {
		return "", err
	}
	if o.Filename == "" {
		o.Filename = filepath.Join(dir, "workload.jfr")
	}
	j, err := t.Start(cp, o)
	if err != nil {
		return "", err
	}
	if err := j.Wait(time.Duration(o.Seconds+60) * time.Second); err != nil {
		return "", err
	}
	return o.Filename, nil
}

// Summary runs jfr summary and returns its count per event type (types
// with no events left out; jdk.Metadata and jdk.CheckPoint included) and
// its chunk count.
func (t Tools) Summary(path string) (counts map[string]int64, chunks int, err error) {
	out, err := exec.Command(t.JFR, "summary", path).Output()
	if err != nil {
		return nil, 0, fmt.Errorf("jfr summary: %v", err)
	}
	counts = map[string]int64{}
	inTable := false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "Chunks:" {
			chunks, _ = strconv.Atoi(f[1])
		}
		if strings.HasPrefix(line, "====") {
			inTable = true
			continue
		}
		if !inTable || len(f) < 3 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("jfr summary: line %q", line)
		}
		if n > 0 {
			counts[f[0]] = n
		}
	}
	return counts, chunks, nil
}

// Event is one event of jfr print --json.
type Event struct {
	Type   string         `json:"type"`
	Values map[string]any `json:"values"`
}

// PrintJSON runs jfr print --json --stack-depth 2048 (and --events when
// events is not empty) and calls fn for every event in the tool's order,
// streaming: the output is never held whole. Numbers are json.Number.
func (t Tools) PrintJSON(ctx context.Context, path string, events []string, fn func(Event) error) error {
	args := []string{"print", "--json", "--stack-depth", "2048"}
	if len(events) > 0 {
		args = append(args, "--events", strings.Join(events, ","))
	}
	cmd := exec.CommandContext(ctx, t.JFR, append(args, path)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	err = decodeEvents(bufio.NewReaderSize(stdout, 1<<20), fn)
	if err != nil {
		cmd.Process.Kill()
		io.Copy(io.Discard, stdout)
	}
	if werr := cmd.Wait(); werr != nil && err == nil {
		err = fmt.Errorf("jfr print: %v: %s", werr, stderr.String())
	}
	return err
}

// decodeEvents reads {"recording":{"events":[…]}} one event at a time.
func decodeEvents(r io.Reader, fn func(Event) error) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	want := []any{json.Delim('{'), "recording", json.Delim('{'), "events", json.Delim('[')}
	for _, w := range want {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("jfr print --json: %v", err)
		}
		if tok != w {
			return fmt.Errorf("jfr print --json: got %v, want %v", tok, w)
		}
	}
	for dec.More() {
		var ev Event
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("jfr print --json: %v", err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	return nil
}

// ErrStop may be returned by a PrintJSON callback to stop early.
var ErrStop = errors.New("stop")

// JavaVersion returns the first line of java -version ("openjdk version
// "17.0.15" …"), or "java" when it cannot be run.
func JavaVersion(t Tools) string {
	out, err := exec.Command(t.Java, "-version").CombinedOutput()
	if err != nil {
		return "java"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// FlushWatcher notes when the chunk headers of the JVM directories under a
// repository root grow (a JVM's flush), polling every 2 ms, independently
// of any reader: the reference for measuring a follower's delay.
type FlushWatcher struct {
	mu      sync.Mutex
	flushes []time.Time
	stop    chan struct{}
	done    chan struct{}
}

// WatchFlushes starts watching root/*/*.jfr.
func WatchFlushes(root string) *FlushWatcher {
	w := &FlushWatcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		last := map[string]uint64{} // chunk size by file
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			files, _ := filepath.Glob(filepath.Join(root, "*", "*.jfr"))
			for _, p := range files {
				f, err := os.Open(p)
				if err != nil {
					continue
				}
				// The header's chunk size (bytes 8–15, big-endian) grows
				// with every flush (internal/codec/jfr cannot be used
				// here: its tests use this package).
				var b [16]byte
				_, err = f.ReadAt(b[:], 0)
				f.Close()
				size := binary.BigEndian.Uint64(b[8:])
				if err != nil || string(b[:4]) != "FLR\x00" || size == last[p] {
					continue
				}
				if old, ok := last[p]; ok && size > old {
					w.mu.Lock()
					w.flushes = append(w.flushes, time.Now())
					w.mu.Unlock()
				}
				last[p] = size
			}
		}
	}()
	return w
}

// Flushes returns the flush times seen so far.
func (w *FlushWatcher) Flushes() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.flushes...)
}

// Close stops watching and returns the flush times seen.
func (w *FlushWatcher) Close() []time.Time {
	close(w.stop)
	<-w.done
	return w.Flushes()
}
