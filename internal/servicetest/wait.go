package servicetest

import (
	"errors"
	"testing"
	"time"
)

// Wait polls cond until it returns nil, and fails tb with what and
// cond's last error when timeout passes first. Tests wait for conditions
// so, with generous timeouts, never for fixed times: another build may
// be using both cores.
func Wait(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not so after %v: %v", what, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var errNotYet = errors.New("the condition does not hold")

// WaitFor is Wait for a condition that holds or not.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	Wait(tb, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}
