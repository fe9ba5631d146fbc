// Package perlclient_test holds the Go tests of the Perl monitoring client
// in clients/perl: the golden encoding stream the Perl unit tests compare
// against (written by tracebridge's own Kieker encoder), a run of those
// unit tests (prove), and end-to-end runs of examples/bookstore.pl against
// a real `tracebridge serve` — as Kieker binary over TCP, and as KDB text
// over STOMP through RabbitMQ into a stomp-client receiver — whose Kieker
// log is read back and compared with the call tree the example says it
// executed.
package perlclient_test

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
)

var update = flag.Bool("update", false, "rewrite t/testdata/golden.bin")

func TestMain(m *testing.M) { os.Exit(bridgetest.Run(m)) }

// requireNetStomp skips the test when Net::Stomp is missing, unless
// TRACEBRIDGE_REQUIRE_SERVICES is set.
func requireNetStomp(t *testing.T, perl string) {
	t.Helper()
	out, err := exec.Command(perl, "-MNet::Stomp", "-e", "1").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("Net::Stomp (Debian package libnet-stomp-perl) is not installed: %s", bytes.TrimSpace(out))
	if os.Getenv("TRACEBRIDGE_REQUIRE_SERVICES") != "" {
		t.Fatal(msg + "; TRACEBRIDGE_REQUIRE_SERVICES is set")
	}
	t.Skip(msg)
}

// ---- golden stream ----

// TestGolden encodes t/testdata/golden.json with tracebridge's Kieker
// encoder (single-socket mode) and compares the bytes with golden.bin, the
// stream the Perl unit tests expect their encoder to produce. -update
// rewrites golden.bin.
func TestGolden(t *testing.T) {
	bridgetest.CheckGolden(t, filepath.Join("t", "testdata", "golden.json"), filepath.Join("t", "testdata", "golden.bin"), *update)
}

// TestProve runs the Perl client's unit tests (t/*.t) with prove, or with
// perl when prove is missing.
func TestProve(t *testing.T) {
	pl := bridgetest.Installed(t, "perl")
	files, err := filepath.Glob(filepath.Join("t", "*.t"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tests in t/: %v", err)
	}
	if prove, err := exec.LookPath("prove"); err == nil {
		out, err := exec.Command(prove, append([]string{"-l"}, files...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("prove: %v\n%s", err, out)
		}
		t.Logf("%s", lastLine(out))
		return
	}
	for _, f := range files {
		out, err := exec.Command(pl, "-Ilib", f).CombinedOutput()
		if err != nil || bytes.Contains(out, []byte("\nnot ok")) {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// ---- end to end ----

// TestBookstoreTCP runs the example over Kieker TCP against a real bridge.
func TestBookstoreTCP(t *testing.T) {
	pl := bridgetest.Installed(t, "perl")
	br := bridgetest.StartConfig(t, bridgetest.LogConfig(`{name: perl, type: kieker-tcp, listen: "127.0.0.1:0"}`))
	r, ex := runExample(t, pl, "tcp", "TRACEBRIDGE_HOST=127.0.0.1", "TRACEBRIDGE_PORT="+br.Port("perl"))
	br.Stop()
	checkBookstore(t, r, ex, bridgetest.ReadLog(t, br.LogDir), false)
}

// TestBookstoreSTOMP runs the example over STOMP through RabbitMQ into a
// stomp-client receiver with the Perl probes' mapping.
func TestBookstoreSTOMP(t *testing.T) {
	pl := bridgetest.Installed(t, "perl")
	requireNetStomp(t, pl)
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := fmt.Sprintf("/queue/tracebridge-perl-%d", rand.Int64())
	servicetest.DeleteQueueAfter(t, dest)
	mapping, err := filepath.Abs(filepath.Join("examples", "kieker-perl.map"))
	if err != nil {
		t.Fatal(err)
	}
	br := bridgetest.StartConfig(t, bridgetest.LogConfig(fmt.Sprintf(`{name: perl, type: stomp-client, url: "stomp://guest:guest@%s", destination: %q, mapping: %q}`,
		servicetest.RabbitSTOMP, dest, mapping)))
	r, ex := runExample(t, pl, "stomp", "TRACEBRIDGE_HOST=127.0.0.1", "TRACEBRIDGE_PORT=61613",
		"TRACEBRIDGE_DESTINATION="+dest, "TRACEBRIDGE_LOGIN=guest", "TRACEBRIDGE_PASSCODE=guest")
	want := 0
	for _, s := range ex.Stats {
		want += int(s["sent"].(float64))
	}
	// The broker delivers asynchronously: wait until the bridge logged all.
	deadline := time.Now().Add(20 * time.Second)
	for len(bridgetest.ReadLogSkipBad(t, br.LogDir)) < want+1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	br.Stop()
	checkBookstore(t, r, ex, bridgetest.ReadLog(t, br.LogDir), true)
}

// checkBookstore compares the log with the example's own account (2
// rounds: 3 traces in the parent and 1 in a forked child per round).
func checkBookstore(t *testing.T, r bridgetest.Result, ex bridgetest.Account, recs []record.Record, eprintsRoot bool) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("bookstore.pl exited %d\n%s", r.Code, r.Stderr)
	}
	got := traces(t, recs, eprintsRoot)
	if diff := cmp.Diff(slices.Sorted(slices.Values(ex.Expect)), slices.Sorted(slices.Values(got))); diff != "" {
		t.Fatalf("logged traces differ from the executed ones (-executed +logged):\n%s", diff)
	}
	if len(ex.Expect) != 8 {
		t.Errorf("the example reported %d traces, want 8", len(ex.Expect))
	}
	var causes []string
	for _, r := range recs {
		if r.Type.Name == record.AfterOperationFailedEvent {
			causes = append(causes, r.Values[5].Str())
		}
	}
	sort.Strings(causes)
	want := []string{"card declined: 60 over the limit 50", "card declined: 60 over the limit 50",
		"card declined: 60 over the limit 50", "card declined: 60 over the limit 50",
		"no such book: 9-999-99999-9", "no such book: 9-999-99999-9"}
	if diff := cmp.Diff(want, causes); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
	sent, dropped := 0.0, 0.0
	for _, s := range ex.Stats {
		sent += s["sent"].(float64)
		dropped += s["dropped"].(float64)
	}
	if int(sent) != len(recs)-1 || dropped != 0 || len(ex.Stats) != 3 {
		t.Errorf("stats %v with %d records logged", ex.Stats, len(recs)-1)
	}
	if r.Stderr != "" {
		t.Errorf("stderr: %s", r.Stderr)
	}
}

// TestBookstoreWithoutBridge: nothing listens; the example still exits 0,
// promptly, and reports what it dropped, with either transport.
func TestBookstoreWithoutBridge(t *testing.T) {
	pl := bridgetest.Installed(t, "perl")
	for _, transport := range []string{"tcp", "stomp"} {
		t.Run(transport, func(t *testing.T) {
			if transport == "stomp" {
				requireNetStomp(t, pl)
			}
			port := servicetest.FreePort(t)
			r, ex := runExample(t, pl, transport, "TRACEBRIDGE_HOST=127.0.0.1", fmt.Sprintf("TRACEBRIDGE_PORT=%d", port))
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			if r.Elapsed > 20*time.Second {
				t.Errorf("took %v", r.Elapsed)
			}
			recorded, dropped := 0.0, 0.0
			for _, s := range ex.Stats {
				recorded += s["recorded"].(float64)
				dropped += s["dropped"].(float64)
			}
			if recorded != 96 || dropped != 96 {
				t.Errorf("stats %v", ex.Stats)
			}
			if !strings.Contains(r.Stderr, "tracebridge: 78 of 78 records dropped") || !strings.Contains(r.Stderr, "tracebridge: 9 of 9 records dropped") {
				t.Errorf("no drop reports on stderr: %q", r.Stderr)
			}
			t.Logf("exited in %v", r.Elapsed.Round(time.Millisecond))
		})
	}
}

// runExample runs examples/bookstore.pl (2 rounds) over transport with env
// added to the environment.
func runExample(t *testing.T, pl, transport string, env ...string) (bridgetest.Result, bridgetest.Account) {
	t.Helper()
	cmd := exec.Command(pl, filepath.Join("examples", "bookstore.pl"), "--transport", transport, "2")
	cmd.Env = append(os.Environ(), env...)
	r := bridgetest.Exec(t, cmd)
	return r, bridgetest.ParseAccount(t, r)
}

// traces returns the call tree of every trace in the log; every trace must
// be a root: parent = itself/-1 over TCP, 0/0 as the EPrints probes wrote
// it over STOMP.
func traces(t *testing.T, recs []record.Record, eprintsRoot bool) []string {
	t.Helper()
	for _, r := range recs {
		if r.Type.Name != record.TraceMetadata {
			continue
		}
		tr := r.Values[0].Int()
		wantParent, wantOrder := tr, int64(-1)
		if eprintsRoot {
			wantParent, wantOrder = 0, 0
		}
		if r.Values[4].Int() != wantParent || r.Values[5].Int() != wantOrder {
			t.Errorf("trace %d: parent %d/%d, want %d/%d", tr, r.Values[4].Int(), r.Values[5].Int(), wantParent, wantOrder)
		}
	}
	return bridgetest.CallTrees(t, recs)
}

// ---- encoder round trip ----

const encodeScript = `
use strict; use warnings; use JSON::PP (); use TraceBridge::Kieker qw(:all);
open(my $f, '<:raw', $ARGV[0]) or die $!;
my $spec = JSON::PP->new->utf8->decode(do { local $/; <$f> });
my %kind = (TraceMetadata => META, BeforeOperationEvent => BEFORE, AfterOperationEvent => AFTER, AfterOperationFailedEvent => FAILED);
my $reg = TraceBridge::Kieker->new;
my $buf = '';
for my $r (@$spec) {
	my $k = $kind{ $r->{type} };
	if ($k == META) {
		$reg->append(\$buf, $k, @{$r}{qw(traceId threadId sessionId hostname parentTraceId parentOrderId)});
	} else {
		$reg->append(\$buf, $k, @{$r}{qw(timestamp traceId orderIndex operationSignature classSignature)}, $k == FAILED ? $r->{cause} : ());
	}
}
binmode STDOUT;
print $buf;
`

// TestEncoderRoundTrip encodes random records with the Perl encoder and
// decodes them with tracebridge's Kieker decoder (in random pieces).
func TestEncoderRoundTrip(t *testing.T) {
	pl := bridgetest.Installed(t, "perl")
	bridgetest.EncoderRoundTrip(t, 3000, func(in string) []byte {
		r := bridgetest.Exec(t, exec.Command(pl, "-Ilib", "-e", encodeScript, in))
		if r.Code != 0 || r.Stderr != "" {
			t.Fatalf("encoding: exit %d\n%s", r.Code, r.Stderr)
		}
		return []byte(r.Stdout)
	})
}
