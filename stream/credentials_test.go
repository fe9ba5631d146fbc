package stream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCredentials: which credential Open presents. A server on loopback
// gets the credential under the data directory; a server elsewhere never
// does unasked; --creds, the URL's and the options' user come first.
func TestCredentials(t *testing.T) {
	dataDir := t.TempDir()
	os.MkdirAll(filepath.Join(dataDir, "nats"), 0o700)
	os.WriteFile(CredentialsFile(dataDir), []byte("tracebridge:local\n"), 0o600)
	other := filepath.Join(t.TempDir(), "creds")
	os.WriteFile(other, []byte("tracebridge:copied\n"), 0o600)
	for _, c := range []struct {
		name      string
		o         Options
		host      string
		urlUser   string
		want      string // user:password, "" for none
		wantError bool
	}{
		{"loopback, data dir", Options{DataDir: dataDir}, "127.0.0.1", "", "tracebridge:local", false},
		{"localhost, data dir", Options{DataDir: dataDir}, "localhost", "", "tracebridge:local", false},
		{"elsewhere, data dir", Options{DataDir: dataDir}, "192.0.2.1", "", "", false},
		{"no bridge there", Options{DataDir: t.TempDir()}, "127.0.0.1", "", "", false},
		{"creds file", Options{DataDir: dataDir, CredsFile: other}, "192.0.2.1", "", "tracebridge:copied", false},
		{"creds file missing", Options{CredsFile: other + "x"}, "127.0.0.1", "", "", true},
		{"URL's user", Options{DataDir: dataDir, CredsFile: other}, "127.0.0.1", "u", "u:p", false},
		{"options' user", Options{User: "o", Password: "q", CredsFile: other}, "127.0.0.1", "u", "o:q", false},
	} {
		urlPass := ""
		if c.urlUser != "" {
			urlPass = "p"
		}
		user, pass, err := c.o.credentials(c.host, c.urlUser, urlPass)
		got := ""
		if user != "" {
			got = user + ":" + pass
		}
		if (err != nil) != c.wantError || got != c.want {
			t.Errorf("%s: %q %v, want %q (error %v)", c.name, got, err, c.want, c.wantError)
		}
	}
}

// TestParseURL: one server's URL, or the servers of one NATS cluster
// comma-separated; credentials come out of the first and off every one,
// a port is added where none is given, and anything else is refused.
func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ in, target, user, pass, err string }{
		{in: "nats://127.0.0.1:14222", target: "nats://127.0.0.1:14222"},
		{in: "tls://u:p@a.example", target: "tls://a.example:4222", user: "u", pass: "p"},
		{in: "tls://u:p@a:1, tls://b:2,tls://x:y@c", target: "tls://a:1,tls://b:2,tls://c:4222", user: "u", pass: "p"},
		{in: "nats://a:1,b:2", err: "want nats://HOST:PORT"},
		{in: "http://a:1", err: "want nats://HOST:PORT or tls://HOST:PORT"},
		{in: "a:1", err: "want nats://HOST:PORT"},
	} {
		target, user, pass, err := parseURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseURL(%q): %v, want an error saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || target != tc.target || user != tc.user || pass != tc.pass {
			t.Errorf("parseURL(%q) = %q %q %q %v, want %q %q %q", tc.in, target, user, pass, err, tc.target, tc.user, tc.pass)
		}
	}
	if h := hostOf("nats://127.0.0.1:1,nats://10.0.0.1:2"); h != "127.0.0.1" {
		t.Errorf("hostOf of a list: %q, want the first server's host", h)
	}
}

// FuzzParseURL: parseURL never panics, and what it returns parses again
// to itself, without credentials.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"nats://127.0.0.1:14222", "tls://u:p@a:1,tls://b", "nats://[::1]:4222", "nats://a:1,,", "tls://%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		target, _, _, err := parseURL(in)
		if err != nil {
			return
		}
		again, user, pass, err := parseURL(target)
		if err != nil || again != target || user != "" || pass != "" {
			t.Fatalf("parseURL(%q) = %q; again: %q %q %q %v", in, target, again, user, pass, err)
		}
	})
}
