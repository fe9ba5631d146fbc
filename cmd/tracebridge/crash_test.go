package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// TestCompressedLogAfterKill kills `serve` (-9) writing each compressed
// format after it flushed, and reads the log back with `cat`, as a user
// would: every record written before the flush is printed and cat exits 0;
// a cut at the end of the last data file is a warning naming the file and
// the offset, at most once. (gzip and xz end their stream on each flush,
// so their files are complete unless bytes after the flush were on their
// way; deflate and zip, which Kieker reads as one stream, are cut.)
func TestCompressedLogAfterKill(t *testing.T) {
	for _, tc := range []struct {
		compression, format string
		cut                 bool // the last file is always cut
	}{
		{"xz", "binary", false},
		{"xz", "ascii", false},
		{"gzip", "binary", false},
		{"deflate", "ascii", true},
		{"zip", "binary", true},
	} {
		t.Run(tc.compression+"/"+tc.format, func(t *testing.T) {
			dir := t.TempDir()
			cfg := fmt.Sprintf(`
flush_interval: 1s
receivers: [{name: kdb, type: tcp-server, listen: "127.0.0.1:0"}]
sinks: [{type: kieker-log, path: logs, format: %s, compression: %s}]
`, tc.format, tc.compression)
			p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, cfg))
			send(t, p.Receivers["kdb"], kdbEvents(t, 5, 0, 5000))
			time.Sleep(2500 * time.Millisecond) // at least one periodic flush after the records
			p.Kill()
			files, _ := filepath.Glob(filepath.Join(p.LogDir, "*"+map[string]string{"xz": ".xz", "gzip": ".gz", "deflate": ".df", "zip": ".zip"}[tc.compression]))
			if len(files) == 0 {
				entries, _ := os.ReadDir(p.LogDir)
				t.Fatalf("no %s data file in %s: %v", tc.compression, p.LogDir, entries)
			}

			r := tb(t, "cat", "--json", p.LogDir)
			if r.code != 0 {
				t.Fatalf("cat after kill -9: exit %d\nstderr:\n%s", r.code, r.stderr)
			}
			if n := strings.Count(r.stdout, `"traceId":5,`); n != 5000 {
				t.Errorf("cat printed %d of the 5000 records flushed before kill -9", n)
			}
			warnings := strings.Count(r.stderr, "warning:")
			switch {
			case warnings > 1 || tc.cut && warnings != 1:
				t.Errorf("%d warnings, want %s:\n%s", warnings, map[bool]string{true: "one", false: "at most one"}[tc.cut], r.stderr)
			case warnings == 1 && (!strings.Contains(r.stderr, filepath.Base(files[len(files)-1])) || !strings.Contains(r.stderr, "offset")):
				t.Errorf("warning does not name the last data file and the offset:\n%s", r.stderr)
			}
			if strings.TrimSpace(strings.ReplaceAll(r.stderr, "\n", "")) != "" && warnings == 0 {
				t.Errorf("stderr:\n%s", r.stderr)
			}
		})
	}
}

// TestCutInTheMiddleOfALog: a cut at the end of a log's last data file is
// what a killed writer leaves (a warning, exit 0); the same cut in a data
// file before the last is malformed data (exit 1, or a skip with
// --skip-bad).
func TestCutInTheMiddleOfALog(t *testing.T) {
	in := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	for _, tc := range []struct {
		name string
		cut  func(files []string) string
		code int
	}{
		{"last file", func(files []string) string { return files[len(files)-1] }, 0},
		{"first file", func(files []string) string { return files[0] }, exitData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := strings.TrimSpace(ok(t, "convert", "--to", "binary", "--compress", "gzip", "--max-entries", "100", in, t.TempDir()).stdout)
			files, _ := filepath.Glob(filepath.Join(log, "*.bin.gz"))
			if len(files) < 2 {
				t.Fatalf("want several data files, got %v", files)
			}
			cut := tc.cut(files)
			st, err := os.Stat(cut)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(cut, st.Size()-5); err != nil {
				t.Fatal(err)
			}
			r := tb(t, "cat", log)
			if r.code != tc.code || !strings.Contains(r.stderr, filepath.Base(cut)) {
				t.Fatalf("exit %d, want %d, with a message naming %s; stderr:\n%s", r.code, tc.code, filepath.Base(cut), r.stderr)
			}
			if tc.code == 0 && !strings.Contains(r.stderr, "warning:") {
				t.Errorf("no warning:\n%s", r.stderr)
			}
		})
	}
}
