package tcp

import (
	"context"
	"log/slog"
	"time"

	"github.com/tracebridge/tracebridge/internal/lograte"
)

// rateLog logs at most perSecond lines per one-second window (see
// lograte.Limiter); further lines in the window are counted and reported in
// one "more connection faults suppressed" line when the next line is logged
// after the window, or on flush. It is safe for concurrent use.
type rateLog struct {
	log      *slog.Logger
	receiver string
	limit    lograte.Limiter
	now      func() time.Time
}

func newRateLog(log *slog.Logger, receiver string, perSecond int) *rateLog {
	return &rateLog{log: log, receiver: receiver, limit: lograte.Limiter{PerSecond: perSecond}, now: time.Now}
}

// warn logs msg with attrs at warning level unless the window's budget is
// spent.
func (l *rateLog) warn(msg string, attrs ...slog.Attr) {
	suppressed, ok := l.limit.AllowAt(l.now())
	if suppressed > 0 {
		l.report(suppressed)
	}
	if ok {
		l.log.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
	}
}

// flush reports lines suppressed in the current window.
func (l *rateLog) flush() {
	if n := l.limit.TakeSuppressed(); n > 0 {
		l.report(n)
	}
}

func (l *rateLog) report(n int) {
	l.log.LogAttrs(context.Background(), slog.LevelWarn, "more connection faults suppressed",
		slog.String("receiver", l.receiver), slog.Int("suppressed", n))
}
