package lograte

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOutage(t *testing.T) {
	type ev struct {
		ok   bool  // a success (Recover), else a failure (Fail)
		want int64 // Fail: 1 when it starts an outage; Recover: the failures
	}
	fail := func(starts bool) ev {
		if starts {
			return ev{false, 1}
		}
		return ev{false, 0}
	}
	ok := func(n int64) ev { return ev{true, n} }
	for _, tc := range []struct {
		name string
		evs  []ev
	}{
		{"successes only", []ev{ok(0), ok(0)}},
		{"one outage", []ev{ok(0), fail(true), fail(false), fail(false), ok(3), ok(0)}},
		{"two outages", []ev{fail(true), ok(1), fail(true), fail(false), ok(2)}},
		{"an outage not over", []ev{fail(true), fail(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Outage
			var got []ev
			for _, e := range tc.evs {
				if e.ok {
					got = append(got, ok(o.Recover()))
				} else {
					got = append(got, fail(o.Fail()))
				}
			}
			if d := cmp.Diff(tc.evs, got, cmp.AllowUnexported(ev{})); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

func TestOutageFailures(t *testing.T) {
	var o Outage
	o.Fail()
	o.Fail()
	if n := o.Failures(); n != 2 {
		t.Fatalf("Failures = %d, want 2", n)
	}
	o.Recover()
	if n := o.Failures(); n != 0 {
		t.Fatalf("Failures after Recover = %d, want 0", n)
	}
}

// TestOutageConcurrent checks under -race that failures and successes on
// many goroutines pair every start with an end and count every failure
// once, with and without Settle.
func TestOutageConcurrent(t *testing.T) {
	for _, settle := range []time.Duration{0, 50 * time.Microsecond} {
		t.Run(settle.String(), func(t *testing.T) {
			o := Outage{Settle: settle}
			var mu sync.Mutex
			starts, ends, counted := 0, 0, int64(0)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 1000 {
						if (i+g)%3 == 0 {
							n := o.Recover()
							mu.Lock()
							if n > 0 {
								ends++
								counted += n
							}
							mu.Unlock()
							continue
						}
						s := o.Fail()
						mu.Lock()
						if s {
							starts++
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if n := o.End(); n > 0 {
				ends++
				counted += n
			}
			failures := int64(0)
			for g := range 8 {
				for i := range 1000 {
					if (i+g)%3 != 0 {
						failures++
					}
				}
			}
			if counted != failures {
				t.Errorf("%d failures counted by the ends, want %d", counted, failures)
			}
			if starts != ends || starts == 0 {
				t.Errorf("%d outages started, %d ended; want as many, at least one", starts, ends)
			}
		})
	}
}

func TestOutageRecoverAllocs(t *testing.T) {
	var o Outage
	if n := testing.AllocsPerRun(100, func() { o.Recover() }); n != 0 {
		t.Errorf("Recover allocates %v times, want 0", n)
	}
}

// TestOutageSettle: with Settle, successes end an outage only once they
// have gone on that long; a failure before goes on with the outage.
func TestOutageSettle(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	o := Outage{Settle: time.Second}
	if o.RecoverAt(at(0)) != 0 {
		t.Fatal("a success without an outage ended one")
	}
	if !o.Fail() || o.Fail() {
		t.Fatal("the first failure did not start the outage, or the second did")
	}
	steps := []struct {
		ms   int
		want int64
	}{{100, 0}, {600, 0}} // successes for less than Settle: not over
	for _, s := range steps {
		if n := o.RecoverAt(at(s.ms)); n != s.want {
			t.Fatalf("success at %d ms: %d, want %d", s.ms, n, s.want)
		}
	}
	if o.Fail() {
		t.Fatal("a failure after successes shorter than Settle started a new outage")
	}
	if n := o.RecoverAt(at(1200)); n != 0 { // the first success since that failure
		t.Fatalf("success at 1200 ms: %d, want 0 (settling again)", n)
	}
	if n := o.RecoverAt(at(2199)); n != 0 {
		t.Fatalf("success at 2199 ms: %d, want 0", n)
	}
	if n := o.RecoverAt(at(2200)); n != 3 {
		t.Fatalf("success at 2200 ms: %d, want the 3 failures", n)
	}
	if n := o.RecoverAt(at(2300)); n != 0 {
		t.Fatalf("success after the end: %d, want 0", n)
	}
	// End ends an outage that has not settled.
	o.Fail()
	o.RecoverAt(at(3000))
	if n := o.End(); n != 1 {
		t.Fatalf("End: %d, want 1", n)
	}
	if o.Failures() != 0 || o.End() != 0 {
		t.Fatal("End left an outage")
	}
	if !o.Fail() {
		t.Fatal("a failure after End did not start an outage")
	}
}
