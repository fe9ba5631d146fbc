package main

import (
	"fmt"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// Timeouts.
const (
	// stallTimeout ends a run whose count has not moved for this long.
	// RabbitMQ sometimes delivers nothing for seconds while publishers
	// flood the queue; the table shows the longest pause of every run.
	stallTimeout = 30 * time.Second
	// storeStallTimeout ends a publish-only run of the embedded broker
	// whose stream stops growing: the publishers have flushed, so the
	// broker holds every message it will ever store.
	storeStallTimeout = 5 * time.Second
	// startTimeout bounds the embedded broker's start and the bridge's
	// receiver's connect.
	startTimeout = benchkit.StartTimeout
)

// connectedMark is what the broker receivers log (internal/source/broker
// State.Up through serve's slog text handler) once they consume.
const connectedMark = "msg=connected receiver=" + benchkit.ReceiverName

// receiverConfig returns the YAML of the receiver a path drives (see
// benchkit.Start).
func receiverConfig(path string, o *options, queue string) string {
	switch path {
	case pathSTOMP:
		return fmt.Sprintf(`    type: stomp-client
    url: %q
    user: %q
    password: %q
    vhost: %q
    destination: %q
`, o.stompURL, o.stompUser, o.stompPassword, o.vhost, queue)
	case pathEmbedded, pathEmbeddedJS:
		return `    type: broker-embedded
    listen: "127.0.0.1:0"
`
	}
	return `    type: tcp-server
    listen: "127.0.0.1:0"
`
}

// waitConnected waits until the bridge's broker receiver has logged that
// it is connected (for STOMP: subscribed), so the clock does not include
// it.
func waitConnected(b *benchkit.Bridge) error {
	deadline := time.Now().Add(startTimeout)
	for !b.Stderr().Contains(connectedMark) {
		select {
		case <-b.Exited():
			return fmt.Errorf("tracebridge serve exited before its receiver connected (%v): %s", b.WaitErr(), b.Stderr())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the receiver did not log %q within %v: %s", connectedMark, startTimeout, b.Stderr())
		}
	}
	return nil
}
