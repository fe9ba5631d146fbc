package listenpolicy

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestCheck: off loopback a listener needs TLS or insecure; on loopback
// it needs neither; the refusal names the key, the address and the fix.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		addr          string
		tls, insecure bool
		ok            bool
	}{
		{"127.0.0.1:1", false, false, true},
		{"127.9.8.7:1", false, false, true},
		{"[::1]:1", false, false, true},
		{"localhost:1", false, false, true},
		{"LOCALHOST:1", false, false, true},
		{"[::ffff:127.0.0.1]:1", false, false, true},
		{":1", false, false, false},
		{"0.0.0.0:1", false, false, false},
		{"[::]:1", false, false, false},
		{"10.1.2.3:1", false, false, false},
		{"example.org:1", false, false, false},
		{"0.0.0.0:1", true, false, true},
		{"0.0.0.0:1", false, true, true},
		{":1", true, true, true},
		{"nohostport", false, false, false},
		{"nohostport", false, true, false},
	} {
		t.Run(c.addr, func(t *testing.T) {
			err := Check("registry_listen", c.addr, c.tls, c.insecure, "tls: {cert, key}")
			if (err == nil) != c.ok {
				t.Fatalf("Check(%q, tls %v, insecure %v) = %v, want ok %v", c.addr, c.tls, c.insecure, err, c.ok)
			}
			if err != nil && strings.Contains(c.addr, ":") && c.addr != "nohostport" {
				for _, want := range []string{"registry_listen", c.addr, "tls: {cert, key}", "insecure: true"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %q", err, want)
					}
				}
			}
		})
	}
}

// TestPlain: which allowed listeners speak plain text off loopback.
func TestPlain(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:1": false, "[::1]:1": false, "localhost:1": false,
		":1": true, "0.0.0.0:1": true, "[::]:1": true, "10.1.2.3:1": true} {
		if got := Plain(addr, false); got != want {
			t.Errorf("Plain(%q, false) = %v, want %v", addr, got, want)
		}
		if Plain(addr, true) {
			t.Errorf("Plain(%q, true) = true", addr)
		}
	}
}

// TestWarn: one line for plain text off loopback, none otherwise.
func TestWarn(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	Warn(log, "receiver k", "127.0.0.1:10133", false)
	Warn(log, "receiver k", "0.0.0.0:10133", true)
	if buf.Len() != 0 {
		t.Fatalf("warned for loopback or TLS: %s", buf.String())
	}
	Warn(log, "receiver k", "0.0.0.0:10133", false)
	if got := strings.Count(buf.String(), "\n"); got != 1 || !strings.Contains(buf.String(), "receiver k listens on 0.0.0.0:10133 in plain text (insecure: true)") {
		t.Fatalf("warning: %q", buf.String())
	}
	Warn(nil, "receiver k", "0.0.0.0:1", false) // no logger: no panic
}
