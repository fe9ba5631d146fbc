package servicetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalTB records the failure Wait reports and stops it, as the real
// Fatalf stops the test's goroutine.
type fatalTB struct {
	testing.TB
	msg string
}

type stopped struct{}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(stopped{})
}

// failure runs fn with a fatalTB and returns what it reported ("": none).
func failure(fn func(tb testing.TB)) (msg string) {
	tb := &fatalTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
			msg = tb.msg
		}
	}()
	fn(tb)
	return ""
}

// TestWait: Wait returns once the condition holds, and otherwise fails
// after the timeout with the condition's last error.
func TestWait(t *testing.T) {
	calls := 0
	if msg := failure(func(tb testing.TB) {
		Wait(tb, time.Minute, "the third call", func() error {
			if calls++; calls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	}); msg != "" || calls != 3 {
		t.Errorf("a condition that holds at the third call: %q after %d calls", msg, calls)
	}
	calls = 0
	msg := failure(func(tb testing.TB) {
		Wait(tb, 50*time.Millisecond, "never", func() error { calls++; return fmt.Errorf("call %d", calls) })
	})
	if !strings.HasPrefix(msg, "never: not so after 50ms: call ") || !strings.HasSuffix(msg, fmt.Sprint(calls)) || calls < 2 {
		t.Errorf("a condition that never holds: %q after %d calls", msg, calls)
	}
	if msg := failure(func(tb testing.TB) { WaitFor(tb, 20*time.Millisecond, "false", func() bool { return false }) }); !strings.HasPrefix(msg, "false: not so after 20ms") {
		t.Errorf("WaitFor of a false condition: %q", msg)
	}
}
