package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// readmeCommands returns the commands of README.md's code blocks that run
// the tracebridge binary (lines starting with "./tracebridge "), in order,
// and the body of its YAML block.
func readmeCommands(t *testing.T, readme string) (cmds []string, yaml string) {
	t.Helper()
	for _, line := range strings.Split(readme, "\n") {
		if c, ok := strings.CutPrefix(line, "    ./tracebridge "); ok {
			cmds = append(cmds, "./tracebridge "+c)
		}
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no YAML block")
	}
	return cmds, m[1]
}

// TestREADMECommands runs README.md's commands as written from the
// repository root (a copy of it: examples/ and the test data it names,
// with the shared corpus at ../shared), so that every file they name
// exists and every command works: cat, convert, split, gen and replay to
// completion, serve until it is ready (those that consume the machine's
// shared brokers, or need ports that are taken, only have their files
// checked).
func TestREADMECommands(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, yaml := readmeCommands(t, string(readme))
	said := strings.Join(strings.Fields(string(readme)), " ") // lines wrap anywhere
	if len(cmds) < 15 {
		t.Fatalf("found only %d commands in README.md", len(cmds))
	}
	example, err := os.ReadFile(filepath.Join(repo, "examples", "tracebridge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if body := regexp.MustCompile(`(?m)\A(#.*\n)*`).ReplaceAllString(string(example), ""); body != yaml {
		t.Errorf("README.md's YAML is not examples/tracebridge.yaml:\n%s\nvs\n%s", yaml, body)
	}

	// The sandbox: ROOT/repo holds what the commands name, ROOT/shared is
	// the corpus.
	root := t.TempDir()
	box := filepath.Join(root, "repo")
	for _, l := range []struct{ link, target string }{
		{filepath.Join(root, "shared"), filepath.Dir(testcorpus.Path(t, "FORMATS.md"))},
		{filepath.Join(box, "examples"), filepath.Join(repo, "examples")},
		{filepath.Join(box, "cmd", "tracebridge", "testdata"), filepath.Join(repo, "cmd", "tracebridge", "testdata")},
		{filepath.Join(box, "tracebridge"), bridgetest.Binary(t)},
	} {
		if err := os.MkdirAll(filepath.Dir(l.link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(l.target, l.link); err != nil {
			t.Fatal(err)
		}
	}

	var server *bridgetest.Process // the serve command the replays go to
	stop := func() {
		if server != nil {
			server.Stop()
			server = nil
		}
	}
	defer stop()
	for _, c := range cmds {
		c, _, _ = strings.Cut(c, " #") // a comment ends the command
		c = strings.TrimSpace(c)
		args := strings.Fields(strings.TrimPrefix(c, "./tracebridge "))
		if args[0] != "serve" {
			if strings.Contains(c, " --store ") {
				// The store is searched and its hosts managed once the
				// bridge holding it open has stopped (README: Ctrl-C).
				stop()
			}
			if (args[0] == "replay" || args[0] == "tail" || args[0] == "dump" || args[0] == "control") && server == nil {
				t.Logf("not run (no bridge to talk to): %s", c)
				continue
			}
			run := exec.Command("bash", "-o", "pipefail", "-c", c)
			run.Dir = box
			var out bytes.Buffer
			run.Stdout, run.Stderr = &out, &out
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			go func() { <-ctx.Done(); run.Process.Kill() }()
			err := run.Run()
			cancel()
			if err != nil {
				t.Errorf("%s: %v\n%s", c, err, out.String())
			}
			if args[0] == "split" {
				checkSplitSaid(t, c, out.String(), said)
			}
			continue
		}
		stop()
		// Every file a serve command names exists.
		for i, a := range args[:len(args)-1] {
			switch a {
			case "-m", "-L", "-k", "-c":
				if _, err := os.Stat(filepath.Join(box, args[i+1])); err != nil {
					t.Errorf("%s: %v", c, err)
				}
			}
		}
		if strings.Contains(c, " -l ") || strings.Contains(c, "broker-embedded") {
			t.Logf("not started (it would use the machine's brokers or their ports): %s", c)
			continue
		}
		if port := busyPort(t, c, yaml); port != "" {
			t.Logf("not started (port %s is in use): %s", port, c)
			continue
		}
		server = bridgetest.Start(t, box, args[1:]...)
	}
}

// readmeSplitSummary is the summary split prints: what it split (and how many
// traces it cut) or merged.
var readmeSplitSummary = regexp.MustCompile(`(?m)^tracebridge: (split \d+ traces in into \d+ partial traces out \((\d+) cut\)|merged \d+ traces in \(\d+ partial traces put back\) into \d+ traces out)`)

// checkSplitSaid: a README split command printed the summary the README
// says it prints (said: the README, its whitespace collapsed), and a
// --boundary example cut something.
func checkSplitSaid(t *testing.T, c, out, said string) {
	t.Helper()
	m := readmeSplitSummary.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("%s: no summary in its output:\n%s", c, out)
		return
	}
	if strings.Contains(c, "--boundary") && m[2] == "0" {
		t.Errorf("%s: an example that cuts nothing: %s", c, m[1])
	}
	if !strings.Contains(said, "`"+m[1]+"`") {
		t.Errorf("%s printed %q, which README.md does not say it prints", c, m[1])
	}
}

// busyPort returns a port the serve command c needs (the embedded
// default's, -p, the YAML's) that something else holds, or "".
func busyPort(t *testing.T, c, yaml string) string {
	var ports []string
	switch {
	case strings.Contains(c, " -c "):
		for _, m := range regexp.MustCompile(`127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(yaml, -1) {
			ports = append(ports, m[1])
		}
	case strings.Contains(c, " -t "):
		if m := regexp.MustCompile(` -p (\d+)`).FindStringSubmatch(c); m != nil {
			ports = append(ports, m[1])
		}
	default:
		ports = []string{"10133", "10144", "4317", "4318", "8640", "16686", "14222"}
	}
	for _, p := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:"+p)
		if err != nil {
			return p
		}
		ln.Close()
	}
	return ""
}

// TestREADMEOverheadPerCall: README.md's benchmark table gives every
// client's overhead per instrumented call (a method execution with its
// Before and After event), the unit of Go's and C's figures, not per
// record. For Python and Perl, whose READMEs measure MooBench calls of
// depth 10 with 21 records (2.1 records per instrumented call), each
// figure must be closer to the per-call overhead their own tables give than
// to the per-record cost (a factor 2.1 apart; runs scatter less).
func TestREADMEOverheadPerCall(t *testing.T) {
	repo := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\|[^\n]*MooBench[^\n]*$`).FindString(string(readme))
	if row == "" || !strings.HasSuffix(row, "per instrumented call |") {
		t.Fatalf("no MooBench row giving figures per instrumented call: %q", row)
	}
	for _, c := range []struct{ lang, readme, enabled string }{
		{"Python", "clients/python/README.md", "probes sending to the bridge"},
		{"Perl", "clients/perl/README.md", "wrapped, sending over TCP"},
	} {
		m := regexp.MustCompile(c.lang + ` ([\d.]+) µs`).FindStringSubmatch(row)
		if m == nil {
			t.Errorf("the MooBench row has no %s figure in µs: %s", c.lang, row)
			continue
		}
		var got float64
		fmt.Sscan(m[1], &got)
		text, err := os.ReadFile(filepath.Join(repo, c.readme))
		if err != nil {
			t.Fatal(err)
		}
		// The third column is ns per method (sub): per instrumented call.
		perCall := func(config string) float64 {
			m := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(config) + ` \| [^|]+ \| ([\d ]+) \|`).FindStringSubmatch(string(text))
			if m == nil {
				t.Fatalf("%s: no table row %q", c.readme, config)
			}
			var ns float64
			fmt.Sscan(strings.ReplaceAll(m[1], " ", ""), &ns)
			return ns
		}
		call := (perCall(c.enabled) - perCall("no instrumentation")) / 1000 // µs
		record := call / 2.1
		if math.Abs(math.Log(got/call)) >= math.Abs(math.Log(got/record)) {
			t.Errorf("%s: %v µs is a figure per record (%s: %.2f µs per call, %.2f per record)", c.lang, got, c.readme, call, record)
		}
	}
}
