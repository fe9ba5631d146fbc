package stream

import (
	"os"
	"path/filepath"
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
