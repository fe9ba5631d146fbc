package tcp

import (
	"log/slog"
	"testing"
	"time"
)

func TestRateLog(t *testing.T) {
	logs := &logBuffer{}
	l := newRateLog(logs.logger(), "r", 3)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for i := range 10 {
		l.warn("boom", slog.Int("i", i))
	}
	if n := len(logs.lines(t, "boom")); n != 3 {
		t.Fatalf("%d lines in the first second, want 3", n)
	}
	now = now.Add(1500 * time.Millisecond)
	l.warn("boom", slog.Int("i", 10))
	sup := logs.lines(t, "suppressed")
	if len(sup) != 1 || sup[0]["suppressed"] != float64(7) || sup[0]["receiver"] != "r" {
		t.Fatalf("suppressed lines %v, want one counting 7", sup)
	}
	if n := len(logs.lines(t, "boom")); n != 4 {
		t.Fatalf("%d lines, want 4", n)
	}
	for range 5 {
		l.warn("boom")
	}
	l.flush()
	l.flush()
	sup = logs.lines(t, "suppressed")
	if len(sup) != 2 || sup[1]["suppressed"] != float64(3) {
		t.Fatalf("suppressed lines %v, want a second one counting 3", sup)
	}
}
