package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestServeHelp: `serve -h` alone (-h is KDB's host flag otherwise) and
// `serve --help` print the usage and exit 0, as the top-level help
// promises for `<command> -h`; it lists every option once, with both its
// names and its real default (testdata/serve-help.golden).
func TestServeHelp(t *testing.T) {
	golden := filepath.Join("testdata", "serve-help.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(ok(t, "serve", "--help").stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"-t", "tcp-server", "--help"}} {
		r := ok(t, append([]string{"serve"}, args...)...)
		if !strings.HasPrefix(r.stdout, "usage:") || r.stdout != string(want) {
			t.Errorf("serve %v: stdout differs from %s (run with -update after a change):\n%s", args, golden, r.stdout)
		}
	}
	_, opts, found := strings.Cut(string(want), "\noptions:\n")
	if !found {
		t.Fatal("no options section")
	}
	if strings.Contains(opts, "default -1") {
		t.Error("a port shows the marker -1 as its default")
	}
	fs, _, _ := serveFlagSet(nil)
	fs.VisitAll(func(f *flag.Flag) {
		n := len(regexp.MustCompile(`(?m)^  (-\w, |    )--`+regexp.QuoteMeta(f.Name)+`( |$)`).FindAllString(opts, -1))
		if len(f.Name) == 1 {
			n = strings.Count(opts, "  -"+f.Name+", --")
		}
		if n != 1 {
			t.Errorf("option %s is listed %d times", f.Name, n)
		}
	})
}

// TestServeHostFlag: with other flags, -h keeps KDB's meaning (the host).
func TestServeHostFlag(t *testing.T) {
	p := bridgetest.Start(t, t.TempDir(), "-t", "tcp-server", "-h", "127.0.0.1", "-p", "0", "--data-dir", "logs")
	if addr := p.Addr("tcp-server"); !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("listening on %s", addr)
	}
	p.Stop()
	if r := tb(t, "serve", "-t", "tcp-client", "-p", "1", "-h"); r.code != exitUsage {
		t.Errorf("-h without a host among other flags: exit %d, want %d", r.code, exitUsage)
	}
}

// TestTopHelp: `tracebridge help`, -h and --help print the top-level help
// (testdata/help.golden) generated from the command table; without a
// command or with an unknown one it goes to stderr with exit code 4. Every
// command of the table is listed and runs.
func TestTopHelp(t *testing.T) {
	golden := filepath.Join("testdata", "help.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(topUsage()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		var stdout, stderr strings.Builder
		if code := run(context.Background(), args, &stdout, &stderr); code != exitOK || stdout.String() != string(want) {
			t.Errorf("%v: exit %d, stdout differs from %s (run with -update after a change):\n%s", args, code, golden, stdout.String())
		}
	}
	for _, c := range []struct {
		args   []string
		prefix string
	}{{nil, ""}, {[]string{"frobnicate"}, "tracebridge: unknown command \"frobnicate\"\n\n"}} {
		var stdout, stderr strings.Builder
		if code := run(context.Background(), c.args, &stdout, &stderr); code != exitUsage || stderr.String() != c.prefix+string(want) {
			t.Errorf("%v: exit %d, stderr:\n%s", c.args, code, stderr.String())
		}
	}
	for _, c := range commands {
		if !regexp.MustCompile(`(?m)^  ` + c.name + ` +\S`).MatchString(string(want)) {
			t.Errorf("command %s is not in the help", c.name)
		}
		if c.name == "version" {
			continue
		}
		var stdout, stderr strings.Builder
		if code := run(context.Background(), []string{c.name, "-h"}, &stdout, &stderr); code != exitOK {
			t.Errorf("%s -h: exit %d\n%s", c.name, code, stderr.String())
		}
	}
}

// TestServeInsecureFlag: KDB's flags listen on loopback unless -h names
// another address; off loopback the receiver is refused (naming
// insecure and tls) unless --insecure, and then serve warns once.
func TestServeInsecureFlag(t *testing.T) {
	r := tb(t, "serve", "-t", "kieker-tcp", "-h", "0.0.0.0", "-p", "0", "--data-dir", t.TempDir(), "--no-store")
	if r.code != exitConfig || !strings.Contains(r.stderr, "listen 0.0.0.0:0") || !strings.Contains(r.stderr, "insecure") || !strings.Contains(r.stderr, "tls") {
		t.Errorf("-h 0.0.0.0 without --insecure: exit %d, %s", r.code, r.stderr)
	}
	p := bridgetest.Start(t, t.TempDir(), "-t", "kieker-tcp", "-h", "0.0.0.0", "-p", "0", "--insecure", "--data-dir", "data", "--no-store")
	p.Stop()
	out := p.Stdout() + p.Stderr()
	if n := strings.Count(out, "in plain text (insecure: true)"); n != 1 {
		t.Errorf("%d plain-text warnings, want 1:\n%s", n, out)
	}
	if r := tb(t, "serve", "-t", "tcp-client", "-h", "127.0.0.1", "-p", "1", "--insecure"); r.code != exitUsage {
		t.Errorf("--insecure with a client: exit %d, want %d", r.code, exitUsage)
	}
}

// Lines of the one help style: an option's names (short and long, a
// short one alone, or a long one indented as if it had a short one) and
// its argument, its description from column 28 (on the next line when the
// names reach it), and the description's further lines at column 28.
var (
	optionHead = regexp.MustCompile(`^  (-\w, --[a-z][a-z0-9-]*|-\w|    --[a-z][a-z0-9-]*)( [^ ]+)?( {2,}\S.*)?$`)
	optionMore = regexp.MustCompile(`^ {28}\S`)
	// goDefaults are the lines of flag.PrintDefaults: "  -name type" and
	// a tab-indented description.
	goDefaults = regexp.MustCompile(`(?m)^  -[\w-]+( (string|int|uint|float|value|duration))?$|^\t`)
)

// TestHelpStyle: every command of the table (a new one too) and analyze
// --flame print their help for -h and --help on standard output, exit 0,
// in one style: the usage line, and options as serve prints them (short
// and long names aligned, described), not Go's flag defaults; no line is
// wider than 80 columns. The top-level help fits 80 columns too, with one
// line per command.
func TestHelpStyle(t *testing.T) {
	check := func(args []string, out string) {
		t.Helper()
		for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if n := utf8.RuneCountInString(line); n > 80 {
				t.Errorf("%v: line %d has %d columns: %q", args, i+1, n, line)
			}
		}
		if goDefaults.MatchString(out) {
			t.Errorf("%v: Go's flag defaults:\n%s", args, out)
		}
	}
	var top, stderr strings.Builder
	if code := run(context.Background(), []string{"help"}, &top, &stderr); code != exitOK {
		t.Fatalf("help: exit %d", code)
	}
	check([]string{"help"}, top.String())
	for _, c := range commands {
		if n := strings.Count(top.String(), "\n  "+c.name+" "); n != 1 {
			t.Errorf("command %s: %d lines in the top-level help", c.name, n)
		}
		if !regexp.MustCompile(`(?m)^  `+c.name+` +\S.*\n  [a-z]`).MatchString(top.String()) && c.name != commands[len(commands)-1].name {
			t.Errorf("command %s: its summary takes more than one line:\n%s", c.name, top.String())
		}
	}
	helps := [][]string{{"analyze", "--flame", "-h"}}
	for _, c := range commands {
		if c.name != "version" {
			helps = append(helps, []string{c.name, "-h"}, []string{c.name, "--help"})
		}
	}
	for _, args := range helps {
		var stdout, stderr strings.Builder
		if code := run(context.Background(), args, &stdout, &stderr); code != exitOK || stderr.Len() > 0 {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, stderr.String())
			continue
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "usage: tracebridge "+args[0]+" ") {
			t.Errorf("%v: does not start with the usage line:\n%s", args, out)
		}
		check(args, out)
		_, opts, found := strings.Cut(out, "\noptions:\n")
		if !found {
			if strings.Contains(out, "\n  -") {
				t.Errorf("%v: flags outside an options section:\n%s", args, out)
			}
			continue
		}
		for _, line := range strings.Split(strings.TrimSuffix(opts, "\n"), "\n") {
			if !optionHead.MatchString(line) && !optionMore.MatchString(line) {
				t.Errorf("%v: not an option's line: %q", args, line)
			}
		}
	}
}
