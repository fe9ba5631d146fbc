package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/logtest"
)

// TestPublishFailuresLoggedOnce: messages JetStream does not take (the
// connection closed, its reconnection buffer full) fail every publish
// while the fault lasts, however long: that is logged once when it
// starts and once when a publish works again, with the number of
// failures, and a later fault is logged again.
func TestPublishFailuresLoggedOnce(t *testing.T) {
	var logs logtest.Buffer
	p := &Publisher{n: &Node{opt: Options{Node: "p1"}}, log: logs.Logger()}
	down := errors.New("nats: connection closed")
	first := time.Now()
	p.publishFailed(0, down)
	p.publishFailed(1, down)
	// Longer than the rate limits of repeatable lines (one a second).
	waitFor(t, "more than a second of failures", func() bool { return time.Since(first) > 1200*time.Millisecond })
	p.publishFailed(2, down)
	p.published()
	p.published()
	p.publishFailed(3, down)

	type line struct {
		msg       string
		partition any
		failures  any
	}
	var got []line
	for _, l := range logs.Lines(t) {
		if l["node"] != "p1" {
			t.Errorf("logged without the node: %v", l)
		}
		got = append(got, line{l["msg"].(string), l["partition"], l["failures"]})
	}
	want := []line{
		{"cluster: publishing failed", float64(0), nil},
		{"cluster: publishing works again", nil, float64(3)},
		{"cluster: publishing failed", float64(3), nil},
	}
	if len(got) != len(want) {
		t.Fatalf("logged %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %v, want %v", i, got[i], want[i])
		}
	}
}
