package otlp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// storing is the pipeline of a cluster node (pipeline.Shared.AckStored):
// it takes every batch and says through its Done callbacks whether the
// durable sink stored it; while away is set, it did not.
type storing struct {
	away atomic.Bool
	n    atomic.Int64
}

func (s *storing) Consume(_ context.Context, b *record.Batch) error {
	var err error
	if s.away.Load() {
		err = errors.New("cluster: 1 messages not stored by JetStream")
	} else {
		s.n.Add(int64(b.Len()))
	}
	for _, done := range b.Done {
		done(err)
	}
	return nil
}

// TestNotStoredLoggedOncePerOutage: while the durable sink stores
// nothing every request is answered busy, and that is logged once when
// it starts and once when it ends (after unstoredSettle of stored
// requests), with the number of requests refused.
func TestNotStoredLoggedOncePerOutage(t *testing.T) {
	var logs logtest.Buffer
	shared := &pipeline.Shared{}
	shared.SetAckStored(true)
	r, err := NewHTTP(Config{Listen: "127.0.0.1:0"}, pipeline.Settings{Name: "otlp-http", Shared: shared,
		Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	out := &storing{}
	run(t, r, out)
	send := func(want int) {
		t.Helper()
		resp, body := post{body: protoBody(t, traces(2, 1)), contentType: "application/x-protobuf"}.do(t, r.Addr().String())
		if resp.StatusCode != want {
			t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, want)
		}
	}
	send(http.StatusOK)
	out.away.Store(true)
	for range 6 {
		send(http.StatusTooManyRequests)
	}
	out.away.Store(false)
	send(http.StatusOK)
	out.away.Store(true)
	send(http.StatusTooManyRequests) // too soon after a success: the same outage
	out.away.Store(false)
	const ended = "OTLP spans stored again"
	for end := time.Now().Add(60 * time.Second); !strings.Contains(logs.String(), ended); {
		if time.Now().After(end) {
			t.Fatalf("no %q within 60s", ended)
		}
		send(http.StatusOK)
		time.Sleep(20 * time.Millisecond)
	}
	out.away.Store(true)
	send(http.StatusTooManyRequests) // a second outage, not ended

	type line struct {
		Level, Msg, Receiver, Err string
		Failures                  int64
	}
	var got []line
	for _, s := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("log line %q: %v", s, err)
		}
		got = append(got, l)
	}
	started := line{Level: "WARN", Msg: "OTLP spans not stored; clients are answered busy until they are", Receiver: "otlp-http",
		Err: "cluster: 1 messages not stored by JetStream"}
	want := []line{
		started,
		{Level: "INFO", Msg: "OTLP spans stored again", Receiver: "otlp-http", Failures: 7},
		started,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("log lines (-want +got):\n%s", d)
	}
}
