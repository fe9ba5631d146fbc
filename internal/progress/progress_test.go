package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Moved from cmd/tracebridge/split_test.go (TestProgressBar).
func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	p := &Bar{w: &b, total: 2e9, done: func() int64 { return 5e8 }, start: time.Now().Add(-2 * time.Second)}
	p.draw()
	line := b.String()
	for _, want := range []string{"\r[=======", " 25% ", "500.0 MB / 2.00 GB", "MB/s", "0:06 left"} {
		if !strings.Contains(line, want) {
			t.Errorf("bar %q lacks %q", line, want)
		}
	}
	// Without a terminal nothing is drawn.
	q := Start(&b, 1, func() int64 { return 1 })
	q.Pause()
	q.Resume()
	q.Stop()
	q.Stop()
	// A bar not yet started does nothing either.
	var none *Bar
	none.Pause()
	none.Resume()
	none.Stop()
}
