package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// TestQueryNoBridge: query --url where no bridge listens says so and how
// to start one or read a store instead, not only "connection refused".
func TestQueryNoBridge(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	r := tb(t, "query", "--url", "http://"+addr, "--errors")
	if r.code != exitComm {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitComm, r.stderr)
	}
	for _, want := range []string{"no bridge answers at that address", "tracebridge serve", "--store"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

// TestHostsListSizes: hosts list prints a host's size bound as it was
// given (2GiB, not 2147483648) and "-" without one; its age bound "-"
// without one too (it said 0s).
func TestHostsListSizes(t *testing.T) {
	st := filepath.Join(t.TempDir(), "store")
	ok(t, "hosts", "--store", st, "add", "bounded", "--max-size", "2GiB", "--max-age", "7d")
	ok(t, "hosts", "--store", st, "add", "decimal", "--max-size", "500MB")
	ok(t, "hosts", "--store", st, "add", "free")
	out := ok(t, "hosts", "--store", st, "list").stdout
	if strings.Contains(out, "2147483648") {
		t.Errorf("size in bytes:\n%s", out)
	}
	for host, want := range map[string][2]string{"bounded": {"2GiB", "168h0m0s"}, "decimal": {"500MB", "-"}, "free": {"-", "-"}} {
		var line string
		for l := range strings.Lines(out) {
			if strings.HasPrefix(l, host+" ") {
				line = l
			}
		}
		// Group, address and comment are empty: the fields are name,
		// secret, enabled, size, max size, max age, last contact.
		if fields := strings.Fields(line); len(fields) != 7 || fields[4] != want[0] || fields[5] != want[1] {
			t.Errorf("host %s: line %q, want max size %s, max age %s", host, line, want[0], want[1])
		}
	}
}

// TestNothingMatchedIsSaid: a filtering command that finds nothing says
// so on stderr (stdout stays the results alone) and exits 0.
func TestNothingMatchedIsSaid(t *testing.T) {
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	r := ok(t, "traces", "--min-duration", "1h", log)
	if r.stdout != "" || !strings.Contains(r.stderr, "no trace matched (31 assembled)") {
		t.Errorf("traces: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if r := ok(t, "traces", "--min-duration", "3ms", log); strings.Contains(r.stderr, "no trace matched") || r.stdout == "" {
		t.Errorf("traces with a match: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	st := filepath.Join(t.TempDir(), "store")
	ok(t, "hosts", "--store", st, "add", "h") // an empty store
	for _, args := range [][]string{{"--errors"}, {"--errors", "--json"}} {
		r := ok(t, append([]string{"query", "--store", st}, args...)...)
		if !strings.Contains(r.stderr, "query: no trace matched") {
			t.Errorf("query %v: stderr %q", args, r.stderr)
		}
	}
}
