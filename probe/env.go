package probe

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// ConfigFromEnv returns a Config read from the environment variables the
// tracebridge C client reads, so that one setting serves programs in both
// languages:
//
//	TRACEBRIDGE_HOST (or KIEKER_HOSTNAME)   bridge host (127.0.0.1)
//	TRACEBRIDGE_PORT (or KIEKER_PORT)       bridge port (10133)
//	TRACEBRIDGE_HOSTNAME                    Config.Hostname
//	TRACEBRIDGE_SESSION                     Config.SessionID
//	TRACEBRIDGE_INVOCATIONS=0 (false, no, off) Config.NoInvocations
//	TRACEBRIDGE_BUFFER                      Config.BufferEvents
//	TRACEBRIDGE_FLUSH_MS                    Config.FlushInterval
//	TRACEBRIDGE_CONNECT_TIMEOUT_MS          Config.DialTimeout
//	TRACEBRIDGE_RECONNECT_MIN_MS, _MAX_MS   Config.ReconnectMin, ReconnectMax
//	TRACEBRIDGE_EXIT_TIMEOUT_MS             Config.CloseTimeout
//
// Unset or empty variables leave the default. A value that is not a
// number in range is an error naming the variable; the Config returned
// with it holds every other setting. TRACEBRIDGE_ENABLED is read once at
// start (see Enable).
func ConfigFromEnv() (Config, error) {
	var c Config
	var firstErr error
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	env := func(names ...string) string {
		for _, n := range names {
			if v := os.Getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	host := env("TRACEBRIDGE_HOST", "KIEKER_HOSTNAME")
	port := env("TRACEBRIDGE_PORT", "KIEKER_PORT")
	if host != "" || port != "" {
		h, p, _ := net.SplitHostPort(DefaultAddr)
		if host != "" {
			h = host
		}
		if port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				fail(fmt.Errorf("probe: port %q: want 1 to 65535", port))
			} else {
				p = port
			}
		}
		c.Addr = net.JoinHostPort(h, p)
	}
	c.Hostname = os.Getenv("TRACEBRIDGE_HOSTNAME")
	c.SessionID = os.Getenv("TRACEBRIDGE_SESSION")
	switch os.Getenv("TRACEBRIDGE_INVOCATIONS") {
	case "0", "false", "no", "off":
		c.NoInvocations = true
	}
	number := func(name string, lo, hi int) int {
		v := os.Getenv(name)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			fail(fmt.Errorf("probe: %s=%q: want a number from %d to %d", name, v, lo, hi))
			return 0
		}
		return n
	}
	ms := func(name string, lo, hi int) time.Duration {
		return time.Duration(number(name, lo, hi)) * time.Millisecond
	}
	c.BufferEvents = number("TRACEBRIDGE_BUFFER", MinBufferEvents, MaxBufferEvents)
	c.FlushInterval = ms("TRACEBRIDGE_FLUSH_MS", 1, 10000)
	c.DialTimeout = ms("TRACEBRIDGE_CONNECT_TIMEOUT_MS", 1, 60000)
	c.ReconnectMin = ms("TRACEBRIDGE_RECONNECT_MIN_MS", 1, 600000)
	c.ReconnectMax = ms("TRACEBRIDGE_RECONNECT_MAX_MS", 1, 3600000)
	c.CloseTimeout = ms("TRACEBRIDGE_EXIT_TIMEOUT_MS", 1, 600000)
	return c, firstErr
}
