package tcp

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rateLog logs at most perSecond lines per one-second window; further
// lines in the window are counted and reported in one "suppressed" line
// when the next line is logged after the window, or on flush. It is safe
// for concurrent use.
type rateLog struct {
	log       *slog.Logger
	receiver  string
	perSecond int
	now       func() time.Time

	mu         sync.Mutex
	window     time.Time
	n          int
	suppressed int
}

func newRateLog(log *slog.Logger, receiver string, perSecond int) *rateLog {
	return &rateLog{log: log, receiver: receiver, perSecond: perSecond, now: time.Now}
}

// warn logs msg with attrs at warning level unless the window's budget is
// spent.
func (l *rateLog) warn(msg string, attrs ...slog.Attr) {
	now := l.now()
	l.mu.Lock()
	var flushed int
	if now.Sub(l.window) >= time.Second {
		flushed = l.suppressed
		l.window, l.n, l.suppressed = now, 0, 0
	}
	ok := l.n < l.perSecond
	if ok {
		l.n++
	} else {
		l.suppressed++
	}
	l.mu.Unlock()
	if flushed > 0 {
		l.report(flushed)
	}
	if ok {
		l.log.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
	}
}

// flush reports lines suppressed in the current window.
func (l *rateLog) flush() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		l.report(n)
	}
}

func (l *rateLog) report(n int) {
	l.log.LogAttrs(context.Background(), slog.LevelWarn, "more connection faults suppressed",
		slog.String("receiver", l.receiver), slog.Int("suppressed", n))
}
