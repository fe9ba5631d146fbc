package memlimit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/logtest"
)

// fakeUsage is a usage the test sets.
type fakeUsage struct{ v int64 }

func (f *fakeUsage) read() (int64, bool) { return f.v, true }

// TestHysteresis: refusing starts at HighPercent of the Go runtime's
// share of the limit (GoPercent), goes on between the marks, stops below
// LowPercent; Admit counts refusals and
// Wait returns once data is taken again.
func TestHysteresis(t *testing.T) {
	u := &fakeUsage{}
	var buf logtest.Buffer
	l := New(Options{Limit: 1000, Usage: u.read, Logger: buf.Logger(), LogPeriod: time.Nanosecond})
	now := time.Unix(1000, 0)
	steps := []struct {
		usage  int64
		refuse bool
	}{
		{100, false}, {594, false}, {595, true}, {560, true}, {511, true}, {510, true}, {509, false}, {560, false}, {800, true},
	}
	for i, s := range steps {
		u.v = s.usage
		now = now.Add(time.Second)
		l.Sample(now)
		if got := !l.Admit(); got != s.refuse {
			t.Fatalf("step %d: usage %d: refusing %v, want %v", i, s.usage, got, s.refuse)
		}
	}
	st := l.Stats()
	if l.GoLimit() != 850 {
		t.Errorf("Go's limit %d, want 850 of 1000", l.GoLimit())
	}
	if st.Refusals != 5 || st.Episodes != 2 || !st.Refusing || st.Usage != 800 || st.Limit != 1000 {
		t.Errorf("stats %+v, want 5 refusals in 2 episodes, refusing at 800 of 1000", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while refusing: %v, want the context's deadline", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- l.Wait(context.Background()) }()
	u.v = 10
	l.Sample(now.Add(time.Second))
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after refusing stopped")
	}
	if !l.Admit() {
		t.Fatal("refusing below the low mark")
	}
	lines := buf.Lines(t)
	var starts, stops int
	for _, ln := range lines {
		msg, _ := ln["msg"].(string)
		switch {
		case strings.Contains(msg, "refuse new data"):
			starts++
		case strings.Contains(msg, "take data again"):
			stops++
		}
	}
	if starts != 2 || stops != 2 {
		t.Errorf("%d start and %d stop lines, want 2 each:\n%v", starts, stops, lines)
	}
}

// TestLogPeriod: episodes closer than LogPeriod are counted, not logged.
func TestLogPeriod(t *testing.T) {
	u := &fakeUsage{}
	var buf logtest.Buffer
	l := New(Options{Limit: 1000, Usage: u.read, Logger: buf.Logger(), LogPeriod: time.Minute})
	now := time.Unix(1000, 0)
	for i := range 20 {
		u.v = 900
		if i%2 == 1 {
			u.v = 0
		}
		now = now.Add(time.Second)
		l.Sample(now)
	}
	if got := len(buf.Lines(t)); got != 2 {
		t.Fatalf("%d lines for 10 episodes within a minute, want the first start and its stop", got)
	}
	u.v = 900
	l.Sample(now.Add(time.Minute))
	lines := buf.Lines(t)
	if len(lines) != 3 || lines[2]["episodes_not_logged"] != float64(9) {
		t.Fatalf("after the period: %v, want a start line counting 9 episodes not logged", lines)
	}
}

// TestRuntimeUsage: the runtime's figures see live data: holding a
// large buffer raises usage by about its size, and once it is garbage a
// collection lowers usage again.
func TestRuntimeUsage(t *testing.T) {
	var r runtimeUsage
	r.init()
	runtime.GC()
	before, _ := r.read()
	const size = 64 << 20
	held := make([]byte, size)
	for i := range held {
		held[i] = byte(i)
	}
	runtime.GC()
	during, collected := r.read()
	if !collected {
		t.Error("a collection ran and read did not say so")
	}
	if during-before < size*9/10 {
		t.Errorf("usage %d before, %d while holding %d bytes", before, during, size)
	}
	runtime.KeepAlive(held)
	held = nil
	runtime.GC()
	after, _ := r.read()
	if after > during-size*9/10 {
		t.Errorf("usage %d after the buffer became garbage, %d while it was held", after, during)
	}
}

// TestRunRefusesAndRecovers: a real Limiter whose limit is close to what
// the process holds refuses while a large buffer is held and takes data
// again once it is garbage, with no new allocation to trigger a
// collection (Run forces one).
func TestRunRefusesAndRecovers(t *testing.T) {
	var r runtimeUsage
	r.init()
	runtime.GC()
	base, _ := r.read()
	const size = 128 << 20
	// Refusing starts at 59.5 % of the limit (70 % of 85 %): base + size
	// is above it, base alone below the 51 % where it stops.
	limit := (base + size) * 100 / 80
	if base*100 >= limit*50 {
		t.Skipf("the test process holds %d bytes: too much for a %d-byte limit", base, limit)
	}
	l := New(Options{Limit: limit, Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	held := make([]byte, size)
	for i := range held {
		held[i] = 1
	}
	runtime.GC()
	deadline := time.Now().Add(30 * time.Second)
	for l.Admit() {
		if time.Now().After(deadline) {
			t.Fatalf("not refusing while %d of a %d-byte limit are held: %+v", size, limit, l.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	runtime.KeepAlive(held)
	held = nil
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := l.Wait(wctx); err != nil {
		t.Fatalf("still refusing after the buffer became garbage: %v, %+v", err, l.Stats())
	}
}

// TestReserve: the reserve (the binary's pages) is taken off before
// Go's share, at most half the limit.
func TestReserve(t *testing.T) {
	for _, tt := range []struct{ limit, reserve, want int64 }{
		{1000, 0, 850}, {1000, 200, 680}, {1000, 900, 425}, {1000, -5, 850},
	} {
		if got := New(Options{Limit: tt.limit, Reserve: tt.reserve}).GoLimit(); got != tt.want {
			t.Errorf("limit %d, reserve %d: Go's limit %d, want %d", tt.limit, tt.reserve, got, tt.want)
		}
	}
	if FileRSS() <= 0 {
		t.Error("no RssFile read for this process")
	}
}

// TestTarget: a target below the limit sets the Go runtime's soft limit
// (GoTarget: GoPercent of the target less the reserve, at most half of
// it); at or above the limit, or unset, the soft limit is the limit's.
// The budget components size their caches by is the same. Refusing
// still follows the limit.
func TestTarget(t *testing.T) {
	for _, tt := range []struct{ limit, target, reserve, want, wantTarget int64 }{
		{1000, 0, 0, 850, 0}, {1000, 500, 0, 425, 500}, {1000, 500, 100, 340, 500},
		{1000, 500, 400, 212, 500}, {1000, 1000, 100, 765, 0}, {1000, 2000, 0, 850, 0},
	} {
		l := New(Options{Limit: tt.limit, Target: tt.target, Reserve: tt.reserve})
		if l.GoTarget() != tt.want || l.Target() != tt.wantTarget {
			t.Errorf("limit %d, target %d, reserve %d: Go's target %d, target %d; want %d, %d",
				tt.limit, tt.target, tt.reserve, l.GoTarget(), l.Target(), tt.want, tt.wantTarget)
		}
		// Caches and buffers are sized within what the runtime aims at.
		if l.Budget() != tt.want {
			t.Errorf("limit %d, target %d, reserve %d: budget %d, want %d", tt.limit, tt.target, tt.reserve, l.Budget(), tt.want)
		}
	}
	u := &fakeUsage{}
	l := New(Options{Limit: 1000, Target: 500, Usage: u.read})
	u.v = 500 // above the target's 425: the collector works harder, nothing is refused
	l.Sample(time.Unix(1000, 0))
	if !l.Admit() {
		t.Error("refusing at 500 of a 1000-byte limit with a target of 500")
	}
}

// TestSoftLimit: the soft limit SetSoft is given is GoTarget while usage
// is below four fifths of it, then usage plus a quarter, at most GoLimit;
// Sample gives it on the first call and when it moved by more than 1/32.
func TestSoftLimit(t *testing.T) {
	u := &fakeUsage{}
	var set []int64
	l := New(Options{Limit: 100000, Target: 40000, Usage: u.read, SetSoft: func(n int64) { set = append(set, n) }})
	if l.GoTarget() != 34000 || l.GoLimit() != 85000 {
		t.Fatalf("Go's target %d, limit %d; want 34000, 85000", l.GoTarget(), l.GoLimit())
	}
	now := time.Unix(1000, 0)
	for _, s := range []struct {
		usage, soft int64
		set         bool
	}{
		{1000, 34000, true},   // the first sample sets it
		{20000, 34000, false}, // below the target: as it was
		{27200, 34000, false}, // four fifths of it: 27200 + 6800 = 34000
		{28000, 35000, false}, // raised by less than 1/32
		{30000, 37500, true},  // by more
		{60000, 75000, true},  // data outgrew the target: headroom a quarter of it
		{80000, 85000, true},  // at most the limit's
		{90000, 85000, false}, // (refusing: the limit's business)
		{10000, 34000, true},  // down again
	} {
		u.v = s.usage
		now = now.Add(time.Second)
		n := len(set)
		l.Sample(now)
		if got := l.SoftLimit(s.usage); got != s.soft {
			t.Errorf("usage %d: soft limit %d, want %d", s.usage, got, s.soft)
		}
		if (len(set) > n) != s.set || s.set && set[len(set)-1] != s.soft {
			t.Errorf("usage %d: SetSoft calls %v after %d, want one more of %d: %v", s.usage, set, n, s.soft, s.set)
		}
	}
}

// TestDefault: the limit derived from cgroup files and meminfo.
func TestDefault(t *testing.T) {
	const gib = 1 << 30
	meminfo := "MemTotal:       8388608 kB\nMemFree: 1 kB\n"
	tests := []struct {
		name  string
		files map[string]string
		want  int64
		from  string
	}{
		{"ram only", map[string]string{"proc/meminfo": meminfo}, 6 * gib, "MemTotal"},
		{"cgroup v2", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/app\n",
			"sys/fs/cgroup/app/memory.max": "1073741824\n"}, gib / 4 * 3, "memory.max"},
		{"cgroup v2 max", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/app\n",
			"sys/fs/cgroup/app/memory.max": "max\n"}, 6 * gib, "MemTotal"},
		{"cgroup v2 at the root", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n",
			"sys/fs/cgroup/memory.max": "2147483648\n"}, 3 * gib / 2, "memory.max"},
		{"cgroup v1", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/docker/x\n0::/\n",
			"sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes": "536870912\n"}, 384 << 20, "memory.limit_in_bytes"},
		{"cgroup v1 none", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 6 * gib, "MemTotal"},
		{"cgroup above ram", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/app\n",
			"sys/fs/cgroup/app/memory.max": "17179869184\n"}, 6 * gib, "MemTotal"},
		{"small cgroup", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/app\n",
			"sys/fs/cgroup/app/memory.max": "150000000\n"}, 128 << 20, "memory.max"},
		{"tiny cgroup", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/app\n",
			"sys/fs/cgroup/app/memory.max": "100000000\n"}, 100000000, "memory.max"},
		{"capped", map[string]string{"proc/meminfo": "MemTotal: 268435456 kB\n"}, DefaultCap, "MemTotal"},
		{"nothing", nil, DefaultCap / 4, "no cgroup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, from := defaultAt(root)
			if got != tt.want || !strings.Contains(from, tt.from) {
				t.Errorf("limit %d (%s), want %d (%s…)", got, from, tt.want, tt.from)
			}
		})
	}
	if got, from := Default(); got <= 0 {
		t.Errorf("this machine: %d (%s)", got, from)
	}
}
