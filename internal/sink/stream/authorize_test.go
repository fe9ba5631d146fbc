package stream

import (
	"errors"
	"testing"
)

// TestLoopbackOnly: without a token, control is taken from loopback and
// in-process clients only.
func TestLoopbackOnly(t *testing.T) {
	for _, c := range []struct {
		ips []string
		ok  bool
	}{
		{[]string{"127.0.0.1"}, true}, {[]string{"::1"}, true}, {[]string{""}, true}, {[]string{"127.0.0.1", ""}, true},
		{[]string{"192.0.2.2"}, false}, {[]string{"127.0.0.1", "10.1.2.3"}, false}, {[]string{"not-an-ip"}, false},
	} {
		err := loopbackOnly(c.ips)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%v: %v", c.ips, err)
		}
	}
}
