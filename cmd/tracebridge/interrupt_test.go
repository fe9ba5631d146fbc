package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
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

// TestShutdownReportsUndeliveredRecords: serve stops while its durable
// forward sink cannot reach its target. It says at once that it waits for
// the sink, with the records and how to stop now (it waited 30 s without a
// word), and its last line counts the records lost: at the shutdown
// timeout, then exiting 0 as the README says of SIGTERM, or at a second
// signal, which still ends it at once (it never mentioned them).
func TestShutdownReportsUndeliveredRecords(t *testing.T) {
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	for _, second := range []bool{false, true} {
		name := "timeout"
		if second {
			name = "second signal"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, `
shutdown_timeout: 3s
receivers: [{name: in, type: kieker-tcp, listen: "127.0.0.1:0"}]
sinks:
  - {type: kieker-log, path: logs}
  - {name: fwd, type: forward, url: "kieker-tcp://127.0.0.1:1"}
`))
			ok(t, "replay", log, "--to", "kieker-tcp://"+p.Addr("in"))
			p.Signal(syscall.SIGTERM)
			const waiting = `msg="shutdown: waiting for a sink to deliver its records" sink=fwd records=404 up_to=`
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.Stderr(), waiting); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the wait for the sink is not said within 30 s; stderr:\n%s", p.Stderr())
				}
			}
			lost := `msg="shutdown: records not delivered; they are lost" sink=fwd records=404 `
			if second {
				p.Signal(os.Interrupt)
				select {
				case <-p.Done():
				case <-time.After(15 * time.Second):
					t.Fatal("serve still runs 15 s after a second signal")
				}
				if code := p.ExitCode(); code != -1 {
					t.Errorf("exit code %d, want -1 (ended by the signal)", code)
				}
				lost = `msg="stopping now: records not delivered; they are lost" sink=fwd records=404`
			} else {
				p.Wait(0)
			}
			out := p.Stderr()
			if n := strings.Count(out, waiting); n != 1 || !strings.Contains(out, `hint="a second Ctrl-C stops now`) {
				t.Errorf("the wait said %d times, want once with the hint; stderr:\n%s", n, out)
			}
			if n := strings.Count(out, lost); n != 1 {
				t.Errorf("%q said %d times, want once; stderr:\n%s", lost, n, out)
			}
		})
	}
}
