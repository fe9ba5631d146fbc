package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/logwrite"
)

// bigLog writes a binary log of n Before events and returns its directory.
func bigLog(t *testing.T, n int) string {
	t.Helper()
	cfg := logwrite.Config{Path: t.TempDir(), Binary: true, MaxEntriesInFile: -1, Metadata: true} // one data file
	return bridgetest.WriteEventLog(t, cfg, n, func(j int) (int64, int64) { return int64(j / 100), int64(j % 100) })
}

// TestConvertStopsOnCtrlC interrupts `convert` of a large log (SIGINT, as
// Ctrl-C sends): it stops within a second or so (it went on for 10–12 s),
// removes the incomplete output and says so, and exits 130.
func TestConvertStopsOnCtrlC(t *testing.T) {
	in := bigLog(t, 1_000_000) // tens of seconds of xz compression
	out := t.TempDir()
	cmd := exec.Command(bridgetest.Binary(t), "convert", "--to", "ascii", "--compress", "xz", in, out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	// Interrupt once the output is being written.
	deadline := time.Now().Add(30 * time.Second)
	for entries, _ := os.ReadDir(out); len(entries) == 0; entries, _ = os.ReadDir(out) {
		if time.Now().After(deadline) {
			t.Fatal("convert wrote nothing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	sent := time.Now()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("convert did not stop within 30 s of SIGINT")
	}
	took := time.Since(sent)
	t.Logf("stopped %v after SIGINT", took)
	if took > 3*time.Second {
		t.Errorf("convert took %v to stop after SIGINT", took)
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("exit %d, want %d", code, exitInterrupted)
	}
	msg := stderr.String()
	if !strings.Contains(msg, "interrupted") || !strings.Contains(msg, "removed the incomplete output "+out) || strings.Contains(msg, "context canceled") {
		t.Errorf("stderr does not say that convert was interrupted and what it removed:\n%s", msg)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("left behind in the output directory: %v", entries)
	}
}

// TestSecondSignalEnds: a client that keeps sending keeps `serve`
// draining after the first SIGINT; the second ends it at once.
func TestSecondSignalEnds(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-t", "tcp-server", "-p", "0", "--data-dir", "logs")
	c, err := net.Dial("tcp", p.Addr("tcp-server"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stopSending := make(chan struct{})
	defer close(stopSending)
	go func() {
		data := kdbEvents(t, 1, 0, 100)
		for {
			select {
			case <-stopSending:
				return
			default:
			}
			if _, err := c.Write(data); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	p.Signal(os.Interrupt)
	time.Sleep(500 * time.Millisecond)
	select {
	case <-p.Done():
		t.Fatalf("serve stopped while a client was still sending (the drain should go on); stderr:\n%s", p.Stderr())
	default:
	}
	p.Signal(os.Interrupt)
	select {
	case <-p.Done():
	// Generous for a loaded machine, and still well before the drain's
	// own limit (the 30 s shutdown timeout) would end it.
	case <-time.After(15 * time.Second):
		t.Fatal("serve still runs 15 s after a second SIGINT")
	}
	if code := p.ExitCode(); code != -1 {
		t.Errorf("exit code %d, want -1 (ended by the signal)", code)
	}
}
