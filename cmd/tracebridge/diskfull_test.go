package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
)

// TestStoreDiskFull: when the disk under the trace store fills, ingest
// reports it (the agent is not told OK) and the bridge stays up; every
// trace acknowledged before is kept; once space is free again, ingest
// goes on. The disk is a small tmpfs (mounting one needs root, which CI
// has: .ci/run fails if this test is skipped).
func TestStoreDiskFull(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", data).Run() })
	// Leave room for the store to open, not for much more.
	filler := filepath.Join(data, "filler")
	if err := os.WriteFile(filler, make([]byte, 13<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, `data_dir: data
flush_interval: 100ms
receivers:
  - {name: zico, type: zico, listen: "127.0.0.1:0"}
sinks:
  - {type: store, sync_interval: 100ms}
`))
	rng := rand.New(rand.NewPCG(9, 9))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	send := func(agent *zicotest.Agent) error {
		recs := make([]zico.TraceRecord, 20)
		ptrs := make([]*zico.TraceRecord, len(recs))
		for i := range recs {
			recs[i] = zicotest.Generate(rng, 200, time.Now())
			ptrs[i] = &recs[i]
		}
		sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
		defer scancel()
		return agent.Send(sctx, ptrs...)
	}
	agent := zicotest.NewAgent(p.Addr("zico"), "filling", "")
	defer agent.Close()
	acked := 0
	var err error
	for ctx.Err() == nil {
		if err = send(agent); err != nil {
			break
		}
		acked += 20
	}
	t.Logf("%d traces acknowledged, then: %v", acked, err)
	if testing.Verbose() {
		t.Log(p.Stderr())
	}
	if acked == 0 || ctx.Err() != nil {
		t.Fatalf("the disk did not fill (%d traces acknowledged): %v", acked, err)
	}
	var re *zicotest.ReplyError
	if !errors.As(err, &re) && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Errorf("a full disk answered with %v, want an error reply or a closed connection", err)
	}
	select {
	case <-p.Done():
		t.Fatalf("the bridge died when the disk filled:\n%s", p.Stderr())
	case <-time.After(500 * time.Millisecond):
	}
	if !strings.Contains(p.Stderr(), "no space left on device") {
		t.Errorf("no report of the full disk:\n%s", p.Stderr())
	}

	// Space again: ingest goes on.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	agent2 := zicotest.NewAgent(p.Addr("zico"), "filling", "")
	defer agent2.Close()
	var after error
	for range 50 { // the store may need a sync or two to find its feet
		if after = send(agent2); after == nil {
			break
		}
		agent2.Close()
		agent2 = zicotest.NewAgent(p.Addr("zico"), "filling", "")
		time.Sleep(200 * time.Millisecond)
	}
	if after != nil {
		t.Fatalf("no ingest after space was freed: %v\n%s", after, p.Stderr())
	}
	p.Stop()
	got, _ := queryJSON(t, data, "--host", "filling")
	if len(got) < acked+20 {
		t.Fatalf("%d traces in the store, %d were acknowledged", len(got), acked+20)
	}
}
