// Package lograte keeps repeated log lines down to a few a second: a
// Limiter allows a number of events in each one-second window and counts
// the ones it suppresses, so that the next line logged can say how many
// were left out. Per-record events are counters, not log lines; lograte is
// for the errors that can repeat (sink failures, malformed messages,
// connection faults, a server's warnings).
//
// A window starts with the first event allowed after the previous window
// has lasted a second; events beyond the budget of the current window are
// suppressed and counted until the next window starts. The count is handed
// to the first event allowed after them (Allow's result, the "suppressed"
// attribute of Log), or taken with TakeSuppressed when the caller stops.
//
// An Outage is for the faults that fail every attempt while they last (a
// server away, a node cut off from the cluster): it has them logged once
// when they start and once when they end, with the number of failures in
// between, however long they last.
//
// Concurrency: Limiters and Outages are safe for concurrent use and must
// not be copied after their first use. A Limiter's zero value allows
// DefaultPerSecond events a second; an Outage's has no outage.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultPerSecond is the budget of a Limiter whose PerSecond is zero or
// less.
const DefaultPerSecond = 5

// Limiter allows PerSecond events in each one-second window.
type Limiter struct {
	// PerSecond is the number of events allowed in each window; zero or
	// less means DefaultPerSecond. Set it before the first use.
	PerSecond int

	mu         sync.Mutex
	window     time.Time // start of the current window
	n          int       // events allowed in it
	suppressed int       // events suppressed since the last allowed one
}

// Allow reports whether an event may happen now (ok) and, when it may,
// how many events were suppressed since the last allowed one; that count
// is then forgotten. A suppressed event is counted.
func (l *Limiter) Allow() (suppressed int, ok bool) { return l.AllowAt(time.Now()) }

// AllowAt is Allow at the time now, for callers that read the clock
// already and for tests. A time before the window's start counts as inside
// the window.
func (l *Limiter) AllowAt(now time.Time) (suppressed int, ok bool) {
	per := l.PerSecond
	if per <= 0 {
		per = DefaultPerSecond
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= time.Second {
		l.window, l.n = now, 0
	}
	if l.n >= per {
		l.suppressed++
		return 0, false
	}
	l.n++
	suppressed = l.suppressed
	l.suppressed = 0
	return suppressed, true
}

// TakeSuppressed returns the number of events suppressed since the last
// allowed one and forgets them, for a summary when the caller stops.
func (l *Limiter) TakeSuppressed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.suppressed
	l.suppressed = 0
	return n
}

// Log logs msg with args (as for slog.Logger.Log) at level through log if
// l allows an event now. When lines were suppressed before it, the line
// ends with the attribute "suppressed" holding their number. It reports
// whether the line was logged; args is not modified.
func (l *Limiter) Log(ctx context.Context, log *slog.Logger, level slog.Level, msg string, args ...any) bool {
	n, ok := l.Allow()
	if !ok {
		return false
	}
	if n > 0 {
		args = append(args[:len(args):len(args)], slog.Int("suppressed", n))
	}
	log.Log(ctx, level, msg, args...)
	return true
}
