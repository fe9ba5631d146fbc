package lograte

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type step struct {
	at             time.Duration // since the start
	wantOK         bool
	wantSuppressed int
}

func TestAllowAt(t *testing.T) {
	allow := func(at time.Duration, n int) step { return step{at, true, n} }
	deny := func(at time.Duration) step { return step{at, false, 0} }
	for _, tc := range []struct {
		name  string
		per   int
		steps []step
	}{
		{"budget then suppressed", 2, []step{allow(0, 0), allow(1, 0), deny(2), deny(3)}},
		{"count handed to the next window's first", 2, []step{
			allow(0, 0), allow(0, 0), deny(0), deny(999 * time.Millisecond),
			allow(time.Second, 2), allow(time.Second, 0), deny(time.Second),
			allow(3*time.Second, 1)}},
		{"window starts at its first event", 1, []step{
			allow(500*time.Millisecond, 0), deny(1400 * time.Millisecond), allow(1500*time.Millisecond, 1)}},
		{"a clock going back stays in the window", 1, []step{allow(time.Second, 0), deny(0)}},
		{"zero means the default", 0, []step{
			allow(0, 0), allow(0, 0), allow(0, 0), allow(0, 0), allow(0, 0), deny(0), allow(time.Second, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			l := &Limiter{PerSecond: tc.per}
			var got []step
			for _, s := range tc.steps {
				n, ok := l.AllowAt(start.Add(s.at))
				got = append(got, step{s.at, ok, n})
			}
			if d := cmp.Diff(tc.steps, got, cmp.AllowUnexported(step{})); d != "" {
				t.Errorf("steps (-want +got):\n%s", d)
			}
		})
	}
}

func TestTakeSuppressed(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{PerSecond: 1}
	l.AllowAt(now)
	l.AllowAt(now)
	l.AllowAt(now)
	if n := l.TakeSuppressed(); n != 2 {
		t.Fatalf("TakeSuppressed = %d, want 2", n)
	}
	if n := l.TakeSuppressed(); n != 0 {
		t.Fatalf("second TakeSuppressed = %d, want 0", n)
	}
	if n, ok := l.AllowAt(now.Add(time.Second)); !ok || n != 0 {
		t.Fatalf("after TakeSuppressed: Allow = %d, %v; want 0, true", n, ok)
	}
}

// TestConcurrent checks under -race that every event is either allowed or
// counted once.
func TestConcurrent(t *testing.T) {
	l := &Limiter{PerSecond: 3}
	var mu sync.Mutex
	allowed, counted := 0, 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				n, ok := l.Allow()
				mu.Lock()
				counted += n
				if ok {
					allowed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	counted += l.TakeSuppressed()
	if allowed+counted != 8*500 {
		t.Fatalf("%d allowed + %d suppressed, want %d events", allowed, counted, 8*500)
	}
	if allowed < 3 {
		t.Fatalf("%d allowed, want at least 3", allowed)
	}
}

func TestLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	l := &Limiter{PerSecond: 2}
	args := make([]any, 2, 10) // room to append: Log must not write into it
	args[0], args[1] = "err", "boom"
	var logged []bool
	for range 5 {
		logged = append(logged, l.Log(context.Background(), log, slog.LevelWarn, "sink failed", args...))
	}
	if d := cmp.Diff([]bool{true, true, false, false, false}, logged); d != "" {
		t.Errorf("logged (-want +got):\n%s", d)
	}
	if extra := args[:4]; extra[2] != nil || extra[3] != nil {
		t.Errorf("Log wrote into the caller's args: %v", extra)
	}
	// The next window: its first line counts the three left out.
	l.mu.Lock()
	l.window = l.window.Add(-time.Second)
	l.mu.Unlock()
	l.Log(context.Background(), log, slog.LevelError, "sink failed", args...)

	var got []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		delete(m, "time")
		got = append(got, m)
	}
	want := []map[string]any{
		{"level": "WARN", "msg": "sink failed", "err": "boom"},
		{"level": "WARN", "msg": "sink failed", "err": "boom"},
		{"level": "ERROR", "msg": "sink failed", "err": "boom", "suppressed": float64(3)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
}
