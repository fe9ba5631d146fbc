package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// needSplit skips end-to-end tests until main.go dispatches the split
// command.
func needSplit(t *testing.T) {
	t.Helper()
	if r := tb(t, "split", "-h"); strings.Contains(r.stderr, "unknown command") {
		t.Skip("tracebridge split is not registered in main.go")
	}
}

// runSplitInProcess runs the split command without the binary and returns
// its exit code, stdout and stderr.
func runSplitInProcess(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := report(cmdSplit(context.Background(), args, &out, &errb), &errb)
	return code, out.String(), errb.String()
}

var splitSummary = regexp.MustCompile(`split (\d+) traces in into (\d+) partial traces out \((\d+) cut\); deepest nesting (\d+), deepest call stack (\d+)`)

// TestSplitCommand splits real logs with the real binary, checks the
// output log's name and the summary, and merges the result back into
// exactly the original records.
func TestSplitCommand(t *testing.T) {
	needSplit(t)
	for _, tc := range []struct {
		log, spec string
		ext       string
		traces    string // traces in
		cut       bool
	}{
		{"kieker-1.10-binary-event-trace", `regex:.*\.Catalog .*\.CRM`, ".bin", "100", true},
		{"kieker-1.15-ascii-applicationtracemetadata-teastore", "package:4", ".dat", "2", true},
		{"kieker-2.0-compressed/xz-binary", "package:2", ".bin", "31", false},
		{"kieker-1.8-ascii-operationexecution", "package:3", ".dat", "0", false},
	} {
		t.Run(tc.log, func(t *testing.T) {
			in := testcorpus.Path(t, "kieker-logs", tc.log)
			tmp := t.TempDir()
			r := ok(t, "split", "--boundary", tc.spec, in, filepath.Join(tmp, "split"))
			dir := strings.TrimSpace(r.stdout)
			if filepath.Dir(dir) != filepath.Join(tmp, "split") {
				t.Fatalf("output log %q is not under OUT", dir)
			}
			checkKiekerNames(t, dir, tc.ext)
			m := splitSummary.FindStringSubmatch(r.stderr)
			if m == nil || m[1] != tc.traces || (m[3] != "0") != tc.cut {
				t.Fatalf("summary %q: want %s traces in, cut %v", r.stderr, tc.traces, tc.cut)
			}
			if !strings.Contains(r.stderr, "MB/s") || strings.Contains(r.stderr, "\r") {
				t.Fatalf("summary %q: want a rate and no progress bar", r.stderr)
			}
			orig := ok(t, "cat", "--json", in).stdout
			split := ok(t, "cat", "--json", dir).stdout
			if (split != orig) != tc.cut {
				t.Fatalf("split output changed: %v, want %v", split != orig, tc.cut)
			}
			mr := ok(t, "split", "--merge", dir, filepath.Join(tmp, "merged"))
			merged := strings.TrimSpace(mr.stdout)
			if got := ok(t, "cat", "--json", merged).stdout; got != orig {
				t.Fatalf("merge(split(log)) differs from the log:\n%s", cmp.Diff(orig, got))
			}
			if !strings.Contains(mr.stderr, "partial traces put back") {
				t.Fatalf("merge summary %q", mr.stderr)
			}
		})
	}
}

// TestSplitEveryLog: split and merge every shared log (ASCII output for
// binary input and the other way round).
func TestSplitEveryLog(t *testing.T) {
	needSplit(t)
	for dir := range allLogs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			orig := ok(t, "cat", "--json", dir).stdout
			s := strings.TrimSpace(ok(t, "split", "--boundary", `regex:.*\.(Catalog|getBook)`, "--boundary", "package:3", "--to", "ascii", "--max-entries", "50", dir, filepath.Join(tmp, "s")).stdout)
			m := strings.TrimSpace(ok(t, "split", "--merge", "--to", "binary", "--compress", "gzip", s, filepath.Join(tmp, "m")).stdout)
			if got := ok(t, "cat", "--json", m).stdout; got != orig {
				t.Fatalf("merge(split(log)) differs:\n%s", cmp.Diff(orig, got))
			}
		})
	}
}

func TestSplitErrors(t *testing.T) {
	dir := t.TempDir()
	log := testcorpus.Path(t, "kieker-logs", "kieker-1.10-ascii-event-trace")
	badMap := filepath.Join(dir, "bad.map")
	writeFile(t, badMap, "a=b\nno-equals\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"bad spec", []string{"--boundary", "package:zero", log, dir}, exitUsage, `"package:zero"`},
		{"unknown kind", []string{"--boundary", "class:1", log, dir}, exitUsage, `"class:1"`},
		{"bad regex", []string{"--boundary", "regex:a(", log, dir}, exitUsage, `"regex:a("`},
		{"no boundary", []string{log, dir}, exitUsage, "no --boundary"},
		{"merge with boundary", []string{"--merge", "--boundary", "package:1", log, dir}, exitUsage, "--merge takes no --boundary"},
		{"one argument", []string{"--boundary", "package:1", log}, exitUsage, "want IN and OUT"},
		{"bad limit", []string{"--boundary", "package:1", "--max-depth", "0", log, dir}, exitUsage, "--max-depth"},
		{"unreadable map", []string{"--boundary", "map:" + filepath.Join(dir, "missing.map"), log, dir}, exitConfig, "missing.map"},
		{"bad map line", []string{"--boundary", "map:" + badMap, log, dir}, exitConfig, "bad.map: line 2"},
		{"no log", []string{"--boundary", "package:1", filepath.Join(dir, "nothing"), dir}, exitData, "nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runSplitInProcess(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tc.code, tc.msg)
			}
		})
	}
	// The binary maps them to the same exit codes.
	needSplit(t)
	if r := tb(t, "split", "--boundary", "package:zero", log, dir); r.code != exitUsage || !strings.Contains(r.stderr, "package:zero") {
		t.Fatalf("bad spec: exit %d, %q", r.code, r.stderr)
	}
	if r := tb(t, "split", "--boundary", "map:"+filepath.Join(dir, "missing.map"), log, dir); r.code != exitConfig {
		t.Fatalf("unreadable map: exit %d, %q", r.code, r.stderr)
	}
}

// TestSplitReportsMalformed: a trace that never closes is reported with
// its traceId and written unsplit.
func TestSplitReportsMalformed(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	writeFile(t, filepath.Join(in, "kieker.map"), "$0=kieker.common.record.flow.trace.TraceMetadata\n$1=kieker.common.record.flow.trace.operation.BeforeOperationEvent\n$2=kieker.common.record.flow.trace.operation.AfterOperationEvent\n")
	writeFile(t, filepath.Join(in, "kieker-20260101-000000000-UTC-001.dat"),
		"$0;1;42;1;s;h;42;-1\n$1;2;10;42;0;void a.A.m();a.A\n$1;3;11;42;1;void b.B.n();b.B\n$2;4;12;42;2;void b.B.n();b.B\n")
	code, stdout, stderr := runSplitInProcess("--boundary", "package:1", in, filepath.Join(dir, "out"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "trace 42: never closed: 1 calls open") || !strings.Contains(stderr, "1 malformed traces passed through unsplit (traceIds 42)") {
		t.Fatalf("stderr %q", stderr)
	}
	if !strings.HasPrefix(stdout, filepath.Join(dir, "out")+string(filepath.Separator)+"kieker-") {
		t.Fatalf("stdout %q", stdout)
	}
}
