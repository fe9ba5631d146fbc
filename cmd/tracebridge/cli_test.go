package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

func TestIRLTypesWithL(t *testing.T) {
	opad := testcorpus.Path(t, "kieker-irl", "tools", "opad")
	log := filepath.Join("testdata", "opad-log")

	// Without -L the unknown type is skipped and reported once with its
	// count, and the rest of the log is read; --strict stops at it.
	r := tb(t, "cat", log)
	if r.code != 0 || !strings.Contains(r.stderr, "skipped 2 records of type kieker.tools.opad.record.NamedDoubleRecord") ||
		strings.Count(r.stderr, "NamedDoubleRecord") != 1 || !strings.Contains(r.stdout, "KiekerMetadataRecord") {
		t.Fatalf("without -L: exit %d, stdout %q, stderr %q; want exit 0 and one report of the unknown type", r.code, r.stdout, r.stderr)
	}
	r = tb(t, "cat", "--strict", log)
	if r.code != exitData || !strings.Contains(r.stderr, "kieker.tools.opad.record.NamedDoubleRecord") {
		t.Fatalf("--strict without -L: exit %d, stderr %q; want exit 1 naming the unknown type", r.code, r.stderr)
	}

	got := ok(t, "cat", "--json", "-L", opad, log).stdout
	want := `{"type":"kieker.tools.opad.record.NamedDoubleRecord","loggingTimestamp":1600000000000000000,"fields":{"applicationName":"shop","timestamp":1600000000000000000,"responseTime":12.5}}`
	if !strings.Contains(got, want) {
		t.Fatalf("cat -L output lacks\n%s\ngot:\n%s", want, got)
	}

	// Written and read back in binary too, through an IRL file (not a directory).
	irlFile := filepath.Join(opad, "model", "records", "opad", "OPAD.irl")
	bin := strings.TrimSpace(ok(t, "convert", "-L", irlFile, "--to", "binary", log, t.TempDir()).stdout)
	if again := ok(t, "cat", "--json", "-L", irlFile, bin).stdout; again != got {
		t.Fatalf("binary round trip differs:\n%s\nvs\n%s", again, got)
	}
}

func TestBadIRLIsConfigurationError(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.irl")
	writeFile(t, bad, "package x\nentity E { strin y }\n")
	r := tb(t, "cat", "-L", bad, filepath.Join("testdata", "opad-log"))
	if r.code != exitConfig || !strings.Contains(r.stderr, "bad.irl:2") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming bad.irl:2", r.code, r.stderr)
	}
}

func TestCatStopsAtBadRecord(t *testing.T) {
	r := tb(t, "cat", filepath.Join("testdata", "bad-log"))
	if r.code != exitData {
		t.Fatalf("exit %d, want %d", r.code, exitData)
	}
	for _, want := range []string{"kieker-20260101-000000000-UTC-001.dat", "line 2", "values where 5 were expected"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error %q does not mention %q", r.stderr, want)
		}
	}
	if n := strings.Count(r.stdout, "\n"); n != 1 {
		t.Errorf("printed %d records before the bad one, want 1:\n%s", n, r.stdout)
	}
}

func TestCatSkipBad(t *testing.T) {
	r := ok(t, "cat", "--skip-bad", filepath.Join("testdata", "bad-log"))
	if n := strings.Count(r.stdout, "\n"); n != 3 {
		t.Errorf("printed %d records, want the 3 good ones:\n%s", n, r.stdout)
	}
	for _, want := range []string{"line 2", "line 3", "field timestamp", "line 5", "type id 9", "skipped 3 malformed records"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not mention %q", r.stderr, want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nonsense"},
		{"cat"},
		{"convert", "--to", "yaml", "a", "b"},
		{"convert", "--to", "ascii", "--compress", "bzip2", "a", "b"},
		{"convert", "--to", "ascii", "onlyone"},
		{"cat", "--no-such-flag", "x"},
	} {
		if r := tb(t, args...); r.code != exitUsage {
			t.Errorf("tracebridge %v: exit %d, want %d (stderr %q)", args, r.code, exitUsage, r.stderr)
		}
	}
}

func TestMissingLog(t *testing.T) {
	r := tb(t, "cat", filepath.Join(t.TempDir(), "nothing-here"))
	if r.code == 0 || r.stderr == "" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

// TestConvertWritesOneLogPerInputLog converts a directory holding twelve
// logs into twelve logs.
func TestConvertWritesOneLogPerInputLog(t *testing.T) {
	out := t.TempDir()
	r := ok(t, "convert", "--to", "ascii", testcorpus.Path(t, "kieker-logs", "kieker-2.0-compressed"), out)
	dirs := strings.Fields(r.stdout)
	if len(dirs) != 12 {
		t.Fatalf("%d output logs, want 12:\n%s", len(dirs), r.stdout)
	}
	for _, d := range dirs {
		if got := countTypes(t, ok(t, "cat", "--json", d).stdout); got["KiekerMetadataRecord"] != 1 || got["BeforeOperationEvent"] != 186 {
			t.Errorf("%s: %v", d, got)
		}
	}
}

// TestCommandLineMistakes: values a new user gets wrong are command-line
// errors (exit 4) that say what is expected.
func TestCommandLineMistakes(t *testing.T) {
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-ascii-event-trace")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "-t", "stomp-client", "-l", "127.0.0.1:61613"}, "stomp://HOST:61613"},
		{[]string{"serve", "-t", "jms-client", "-l", "guest:s3cret@127.0.0.1:61613"}, "stomp://HOST:61613"},
		{[]string{"serve", "-t", "nats-client", "-l", "127.0.0.1:4222"}, "nats://HOST:4222"},
		{[]string{"serve", "-t", "mqtt-client"}, "mqtt://HOST:1883"},
		{[]string{"replay", log, "--to", "kieker-tcp://127.0.0.1:1", "--rate", "-5"}, "--rate -5"},
		{[]string{"replay", log, "--to", "kieker-tcp://127.0.0.1:1", "--rate", "NaN"}, "--rate NaN"},
	} {
		r := tb(t, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("tracebridge %v: exit %d, stderr %q; want exit %d saying %q", tc.args, r.code, r.stderr, exitUsage, tc.want)
		}
		if strings.Contains(r.stderr, "s3cret") || strings.Contains(r.stderr, "cannot contain colon") {
			t.Errorf("tracebridge %v: stderr %q", tc.args, r.stderr)
		}
	}
}
