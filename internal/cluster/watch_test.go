package cluster

import (
	"testing"
	"time"
)

// TestStored: an entry's expiry counts from the server's timestamp,
// bounded by when it was received (never later, never more than the
// slack earlier: a server clock behind this node's by more is not
// believed).
func TestStored(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	slack := 2 * time.Second
	for _, c := range []struct {
		created, want time.Time
	}{
		{now.Add(-300 * time.Millisecond), now.Add(-300 * time.Millisecond)}, // a watcher behind: the server's time
		{now.Add(time.Second), now},                   // a server clock ahead: received
		{now.Add(-10 * time.Second), now.Add(-slack)}, // far behind: bounded
	} {
		if got := stored(c.created, now, slack); !got.Equal(c.want) {
			t.Errorf("stored(%v) = %v, want %v", c.created.Sub(now), got.Sub(now), c.want.Sub(now))
		}
	}
}
