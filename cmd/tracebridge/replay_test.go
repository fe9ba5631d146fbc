package main

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// jsonWithout renders records as JSON lines, leaving out the metadata
// records a bridge writes of its own.
func jsonWithout(recs []record.Record, metadata bool) []string {
	var out []string
	for i := range recs {
		if !metadata && recs[i].Type.Name == record.KiekerMetadataRecord {
			continue
		}
		out = append(out, string(jsonl.AppendRecord(nil, &recs[i])))
	}
	return out
}

// TestReplayAndForwardChain replays a real log into bridge A over KDB TCP;
// A writes its own log and forwards over Kieker TCP to bridge B. The same log
// is replayed straight into B over Kieker TCP. Both arrive intact.
func TestReplayAndForwardChain(t *testing.T) {
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	orig := bridgetest.ReadLogSkipBad(t, log)

	dirB := t.TempDir()
	b := bridgetest.Start(t, dirB, "-c", bridgetest.WriteConfig(t, dirB, `
receivers: [{name: in, type: kieker-tcp, listen: "127.0.0.1:0"}]
sinks: [{type: kieker-log, path: logs}]
`))
	dirA := t.TempDir()
	a := bridgetest.Start(t, dirA, "-c", bridgetest.WriteConfig(t, dirA, fmt.Sprintf(`
receivers: [{name: in, type: tcp-server, listen: "127.0.0.1:0"}]
sinks:
  - {type: kieker-log, path: logs}
  - {type: forward, url: "kieker-tcp://%s"}
`, b.Receivers["in"])))

	r := ok(t, "replay", log, "--to", "kdb-tcp://"+a.Receivers["in"], "--rate", "2000")
	if !strings.Contains(r.stdout, "replayed 404 records") {
		t.Fatalf("replay said %q", r.stdout)
	}
	time.Sleep(300 * time.Millisecond)
	a.Stop() // flushes the forward sink
	ok(t, "replay", log, "--to", "kieker-tcp://"+b.Receivers["in"])
	time.Sleep(300 * time.Millisecond)
	b.Stop()

	// KDB has no logging timestamps: compare values only.
	stripTS := func(recs []record.Record) []record.Record {
		for i := range recs {
			recs[i].LoggingTimestamp = -1
		}
		return recs
	}
	viaKDB := jsonWithout(stripTS(bridgetest.ReadLogSkipBad(t, a.LogDir)), false)
	if d := cmp.Diff(jsonWithout(orig, false)[0:], viaKDB); d != "" {
		t.Fatalf("bridge A's log differs from the replayed log (-want +got):\n%s", d)
	}
	inB := bridgetest.ReadLogSkipBad(t, b.LogDir)
	// B holds its own metadata record, what A forwarded (the 404 records
	// A received), then the direct replay.
	if len(inB) != 1+404+404 {
		t.Fatalf("bridge B holds %d records, want 809", len(inB))
	}
	fromA, direct := inB[1:405], inB[405:]
	if d := cmp.Diff(jsonWithout(orig, true), jsonWithout(direct, true)); d != "" {
		t.Fatalf("direct Kieker TCP replay differs (-want +got):\n%s", d)
	}
	if d := cmp.Diff(viaKDB, jsonWithout(stripTS(fromA), false)); d != "" {
		t.Fatalf("forwarded records differ (-want +got):\n%s", d)
	}
}

func TestReplayErrors(t *testing.T) {
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-ascii-event-trace")
	if r := tb(t, "replay", log, "--to", "http://x:1"); r.code != exitUsage {
		t.Errorf("bad scheme: exit %d", r.code)
	}
	if r := tb(t, "replay", log); r.code != exitUsage {
		t.Errorf("no --to: exit %d", r.code)
	}
	if r := tb(t, "replay", log, "--to", "kieker-tcp://127.0.0.1:1"); r.code != exitComm {
		t.Errorf("nobody listening: exit %d (%s)", r.code, r.stderr)
	}
	if r := tb(t, "replay", filepath.Join(t.TempDir(), "none"), "--to", "kieker-tcp://127.0.0.1:1"); r.code == 0 {
		t.Error("missing log accepted")
	}
	// A malformed log is a data error (1), not a communication error.
	ln := serveConns(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	if r := tb(t, "replay", filepath.Join("testdata", "bad-log"), "--to", "kieker-tcp://"+ln.Addr().String()); r.code != exitData {
		t.Errorf("malformed log: exit %d, want %d (%s)", r.code, exitData, r.stderr)
	}
}

// TestReplayIntoSingleServer: a tcp-single-server takes one connection and
// ends when it closes, so replay's connection must be the one that carries
// the records (no connection of its own to check the target first).
func TestReplayIntoSingleServer(t *testing.T) {
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	dir := t.TempDir()
	b := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, `
receivers: [{name: in, type: tcp-single-server, listen: "127.0.0.1:0"}]
sinks: [{type: kieker-log, path: logs}]
`))
	r := ok(t, "replay", log, "--to", "kdb-tcp://"+b.Addr("in"))
	if !strings.Contains(r.stdout, "replayed 404 records") {
		t.Fatalf("replay said %q", r.stdout)
	}
	b.Wait(0) // the one connection ended: so does the bridge
	want := len(jsonWithout(bridgetest.ReadLogSkipBad(t, log), false))
	if n := len(jsonWithout(bridgetest.ReadLogSkipBad(t, b.LogDir), false)); n != want {
		t.Fatalf("the single server's log holds %d records, want %d", n, want)
	}
}

// TestReplayToReceiverThatHangsUp: a receiver that closes every connection
// at once has not read the records; replay must not report them replayed.
func TestReplayToReceiverThatHangsUp(t *testing.T) {
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	ln := serveConns(t, func(c net.Conn) { c.Close() })
	r := tb(t, "replay", log, "--to", "kdb-tcp://"+ln.Addr().String())
	if r.code != exitComm {
		t.Fatalf("replay to a receiver that hangs up: exit %d, want %d\nstdout: %s\nstderr: %s", r.code, exitComm, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "replayed") {
		t.Fatalf("replay claims success: %s", r.stdout)
	}
}

// TestReplayIntoTheWrongReceiver replays KDB binary into the bridge's
// Kieker TCP port: the receiver rejects the stream at offset 0 and writes
// nothing, so replay must fail every time (it said "replayed 404 records"
// in most runs when the receiver had read everything before it closed) and
// say how many records may not have arrived, once (it said it twice).
func TestReplayIntoTheWrongReceiver(t *testing.T) {
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	dir := t.TempDir()
	b := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, bridgetest.LogConfig(`{name: kieker, type: kieker-tcp, listen: "127.0.0.1:0"}`)))
	for run := 0; run < 6; run++ {
		r := tb(t, "replay", log, "--to", "kdb-tcp://"+b.Addr("kieker"))
		if r.code != exitComm || strings.Contains(r.stdout, "replayed") {
			t.Fatalf("run %d: exit %d, want %d without a claim of success\nstdout: %s\nstderr: %s", run, r.code, exitComm, r.stdout, r.stderr)
		}
		if !regexp.MustCompile(`\b404 records .*may not have arrived`).MatchString(r.stderr) {
			t.Errorf("run %d: stderr does not say that 404 records may not have arrived:\n%s", run, r.stderr)
		}
		if n := strings.Count(r.stderr, "\n"); n != 1 {
			t.Errorf("run %d: %d lines on stderr for one failure, want one:\n%s", run, n, r.stderr)
		}
	}
	b.Stop()
	if n := len(jsonWithout(bridgetest.ReadLog(t, b.LogDir), false)); n != 0 {
		t.Errorf("the bridge wrote %d records", n)
	}
}

// TestReplayTellsOfAnOutage: the bridge replay sends to is killed (kill -9)
// in the middle of the stream and started again on the same port. Replay
// waits, and says so on stderr: once when the connection is lost, naming
// the target and the reason, and once when it is back, with how long it was
// down (it said nothing at all, for minutes). It ends over the new
// connection and exits 3 for the records the killed bridge may not have
// read, without asking whether the bridge speaks the protocol: it read the
// last stream to its end.
func TestReplayTellsOfAnOutage(t *testing.T) {
	log := bigLog(t, 100_000)
	dir := t.TempDir()
	a := bridgetest.Start(t, dir, "-t", "kieker-tcp", "-p", "0", "-v", "1000", "--data-dir", "a")
	port := a.Port("kieker-tcp")
	cmd := exec.Command(bridgetest.Binary(t), "replay", log, "--to", "kieker-tcp://127.0.0.1:"+port, "--rate", "20000")
	var stdout, stderr logtest.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 30 s; replay's stderr:\n%s", what, stderr.String())
			}
		}
	}
	waitFor("records at the bridge", func() bool { return strings.Contains(a.Stdout(), "received") })
	a.Kill()
	waitFor("word of the lost connection", func() bool { return strings.Contains(stderr.String(), "connection lost") })
	b := bridgetest.Start(t, dir, "-t", "kieker-tcp", "-p", port, "--data-dir", "b")
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("replay still runs 60 s after the bridge came back; stderr:\n%s", stderr.String())
	}
	b.Stop()
	out := stderr.String()
	if code := cmd.ProcessState.ExitCode(); code != exitComm {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr:\n%s", code, exitComm, stdout.String(), out)
	}
	if n := strings.Count(out, `msg="forward: connection lost, reconnecting" target=kieker-tcp://127.0.0.1:`+port+" err="); n != 1 {
		t.Errorf("the loss said %d times with the target and the reason, want once:\n%s", n, out)
	}
	if n := strings.Count(out, `msg="forward: reconnected" target=kieker-tcp://127.0.0.1:`+port+" down_for="); n != 1 {
		t.Errorf("the return said %d times with how long the target was down, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "may not have arrived") || !strings.Contains(out, "did it stop or restart meanwhile?") || strings.Contains(out, "is it not a") {
		t.Errorf("the final error does not blame the restart alone:\n%s", out)
	}
}

// serveConns listens on a loopback port until the test ends and hands
// each connection to handle on a goroutine of its own.
func serveConns(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acceptEach(t, ln, handle)
	return ln
}

// acceptEach hands each connection ln accepts to handle on a goroutine of
// its own, and closes ln when the test ends.
func acceptEach(t *testing.T, ln net.Listener, handle func(net.Conn)) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
}
