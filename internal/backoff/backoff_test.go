package backoff

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const ms = time.Millisecond

func TestExponential(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max time.Duration
		want     []time.Duration
	}{
		{"doubles up to max", 1 * ms, 5 * ms, []time.Duration{1 * ms, 2 * ms, 4 * ms, 5 * ms, 5 * ms}},
		{"max a power of two of min", 10 * ms, 40 * ms, []time.Duration{10 * ms, 20 * ms, 40 * ms, 40 * ms}},
		{"defaults", 0, 0, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms, 25600 * ms, 30 * time.Second, 30 * time.Second}},
		{"negative bounds are defaults", -1, -1, []time.Duration{100 * ms, 200 * ms}},
		{"default max", 20 * time.Second, 0, []time.Duration{20 * time.Second, 30 * time.Second, 30 * time.Second}},
		{"max below min", time.Second, 100 * ms, []time.Duration{time.Second, time.Second}},
		{"min equals max", 7 * ms, 7 * ms, []time.Duration{7 * ms, 7 * ms}},
		{"huge max does not overflow", time.Duration(math.MaxInt64/2 + 1), math.MaxInt64,
			[]time.Duration{time.Duration(math.MaxInt64/2 + 1), math.MaxInt64, math.MaxInt64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Exponential{Min: tc.min, Max: tc.max}
			var got []time.Duration
			for range tc.want {
				got = append(got, b.Next())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("waits (-want +got):\n%s", d)
			}
			b.Reset()
			if w := b.Next(); w != tc.want[0] {
				t.Errorf("after Reset: %v, want %v", w, tc.want[0])
			}
		})
	}
}

// TestExponentialConcurrent runs Next and Reset from several goroutines
// (as a client library's reconnect and callback goroutines do); -race
// checks the locking, the bounds check the values.
func TestExponentialConcurrent(t *testing.T) {
	b := Exponential{Min: ms, Max: 64 * ms}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				if g == 0 && i%10 == 0 {
					b.Reset()
					continue
				}
				if w := b.Next(); w < ms || w > 64*ms {
					t.Errorf("wait %v outside [1ms, 64ms]", w)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestSleep(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"waits", context.Background(), 5 * ms, true},
		{"zero", context.Background(), 0, true},
		{"negative", context.Background(), -time.Second, true},
		{"done before", cancelled, time.Hour, false},
		{"done before, zero wait", cancelled, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			if got := Sleep(tc.ctx, tc.d); got != tc.want {
				t.Fatalf("Sleep = %v, want %v", got, tc.want)
			}
			if el := time.Since(t0); tc.want && el < tc.d {
				t.Errorf("returned after %v, before %v", el, tc.d)
			}
		})
	}
	t.Run("cancelled while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*ms, cancel)
		t0 := time.Now()
		if Sleep(ctx, time.Hour) {
			t.Fatal("Sleep reported the hour passed")
		}
		if el := time.Since(t0); el > 10*time.Second {
			t.Errorf("returned %v after the cancel", el)
		}
	})
}
