package main

import (
	"fmt"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// receiver is the bridge's receiver for benchkit.Start: Kieker's
// single-socket TCP protocol, which the probe writer speaks.
const receiver = "    type: kieker-tcp\n    listen: \"127.0.0.1:0\"\n"

// waitReceived waits until the bridge's receiver has decoded n records, or
// 60 s.
func waitReceived(br *benchkit.Bridge, n int64) (int64, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := br.ReceivedRecords()
		if err == nil && got >= n {
			return got, nil
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("the bridge decoded %d records, want %d (%v)", got, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
