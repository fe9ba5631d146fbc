package zico_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/memlimit"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/zico"
)

// TestMemoryLimit: near the process's memory limit a DATA packet is
// answered INTERNAL_ERROR (zorka's agent reconnects and sends it again)
// and nothing goes on; an agent that retries gets it in once memory is
// below the limit again.
func TestMemoryLimit(t *testing.T) {
	var usage atomic.Int64
	lim := memlimit.New(memlimit.Options{Limit: 1000, Usage: func() (int64, bool) { return usage.Load(), true }})
	shared := &pipeline.Shared{}
	shared.SetMemory(lim)
	r, err := zico.Factory().NewReceiver(&zico.FactoryConfig{Listen: "127.0.0.1:0"}, pipeline.Settings{Name: "zico", Shared: shared})
	if err != nil {
		t.Fatal(err)
	}
	col := &servicetest.Collector{}
	servicetest.RunBridge(t, r, col)
	addr := r.(*zico.Receiver).Addr().String()

	usage.Store(900)
	lim.Sample(time.Now())
	a := zicotest.NewAgent(addr, "h1", "")
	a.Retries = 1
	defer a.Close()
	rec := exampleRecord()
	err = a.Send(context.Background(), &rec)
	var re *zicotest.ReplyError
	if !errors.As(err, &re) || re.Reply != codec.InternalError {
		t.Fatalf("DATA near the memory limit: %v; want INTERNAL_ERROR", err)
	}
	if col.Len() != 0 {
		t.Fatalf("%d records went on while refusing", col.Len())
	}
	if st := lim.Stats(); st.Refusals == 0 {
		t.Errorf("no refusal counted: %+v", st)
	}

	// The agent retries as zorka's does; memory falls meanwhile.
	a.Retries, a.Backoff = 10, 50*time.Millisecond
	sent := make(chan error, 1)
	go func() {
		rec := exampleRecord()
		sent <- a.Send(context.Background(), &rec)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for lim.Stats().Refusals < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	usage.Store(0)
	lim.Sample(time.Now())
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("a retrying agent: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the retrying agent did not get its packet in")
	}
	col.WaitFor(t, 1, 10*time.Second)
}
