package logdir

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// readAll reads a data file whole, failing the test on an error.
func readAll(t *testing.T, d DataFile) ([]byte, Format) {
	t.Helper()
	s, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := io.ReadAll(s)
	if err != nil {
		t.Fatalf("%s: %v", d.Path, err)
	}
	return b, s.Format
}

func nonEmptyLines(b []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	return n
}

func TestDiscoverCorpus(t *testing.T) {
	root := testcorpus.Path(t, "kieker-logs")
	logs, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	type logInfo struct {
		Dir   string   // the corpus sample directory
		Files []string // data files in order
	}
	var got []logInfo
	for _, l := range logs {
		rel, _ := filepath.Rel(root, l.Path)
		sample := strings.Split(rel, string(filepath.Separator))[0]
		if sample == "kieker-2.0-compressed" {
			sample = strings.Join(strings.Split(rel, string(filepath.Separator))[:2], "/")
		}
		info := logInfo{Dir: sample}
		for _, d := range l.DataFiles() {
			info.Files = append(info.Files, d.Name)
		}
		got = append(got, info)
	}
	want := []logInfo{
		{"kieker-1.10-ascii-event-trace", []string{"kieker-20170805-132412202-UTC-000-Thread-1.dat"}},
		{"kieker-1.10-binary-event-trace", []string{"kieker.bin"}},
		{"kieker-1.13-binary-callobject", []string{"kieker-20200427-090843464-UTC-001.bin"}},
		{"kieker-1.14-ascii-system-metrics", []string{"kieker-20200705-123841331-UTC-001.dat"}},
		{"kieker-1.15-ascii-applicationtracemetadata-teastore", []string{"kieker-20231110-131007269-UTC-001.dat"}},
		{"kieker-1.8-ascii-operationexecution", []string{"kieker-20130910-120352862-UTC-000-Thread-1.dat"}},
		{"kieker-2.0-ascii-event-trace", []string{"kieker-20261122-015824142-UTC-001.dat"}},
		{"kieker-2.0-binary-event-trace", []string{"kieker-20261122-015824402-UTC-001.bin"}},
		{"kieker-2.0-compressed/bzip2-ascii", []string{"kieker-20261122-020824229-UTC-001.gz"}},
		{"kieker-2.0-compressed/bzip2-binary", []string{"kieker-20261122-020824542-UTC-001.gz"}},
		{"kieker-2.0-compressed/deflate-ascii", []string{"kieker-20261122-020820239-UTC-001.df"}},
		{"kieker-2.0-compressed/deflate-binary", []string{"kieker-20261122-020820446-UTC-001.df"}},
		{"kieker-2.0-compressed/gzip-ascii", []string{"kieker-20261122-020820611-UTC-001.gz"}},
		{"kieker-2.0-compressed/gzip-binary", []string{"kieker-20261122-020820822-UTC-001.gz"}},
		{"kieker-2.0-compressed/gzip-binary-rotated", []string{
			"kieker-20261122-020824803-UTC-001.gz", "kieker-20261122-020824835-UTC-002.gz", "kieker-20261122-020824841-UTC-003.gz"}},
		{"kieker-2.0-compressed/xz-ascii", []string{"kieker-20261122-020821503-UTC-001.xz"}},
		{"kieker-2.0-compressed/xz-binary", []string{"kieker-20261122-020822641-UTC-001.xz"}},
		{"kieker-2.0-compressed/zip-ascii", []string{"kieker-20261122-020821096-UTC-001.zip"}},
		{"kieker-2.0-compressed/zip-ascii-rotated", []string{
			"kieker-20261122-020824998-UTC-001.zip", "kieker-20261122-020825048-UTC-002.zip", "kieker-20261122-020825059-UTC-003.zip"}},
		{"kieker-2.0-compressed/zip-binary", []string{"kieker-20261122-020821331-UTC-001.zip"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}

	for _, l := range logs {
		t.Run(l.Path[len(root):], func(t *testing.T) {
			m, err := l.OpenMap()
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			b, err := io.ReadAll(m)
			if err != nil || !bytes.HasPrefix(b, []byte("$0=")) {
				t.Errorf("map starts %q, error %v", b[:min(len(b), 10)], err)
			}
			for _, d := range l.DataFiles() {
				readAll(t, d)
			}
			// The corpus files are smaller than the read buffer, so every
			// byte has been read.
			if l.Consumed() != l.Size() || l.Size() == 0 {
				t.Errorf("Consumed %d, Size %d", l.Consumed(), l.Size())
			}
		})
	}
}

// TestCompressedCorpus reads every variant Kieker 2.0 wrote: compression by
// magic bytes (bzip2 under .gz), ASCII or binary by content, 404 records.
func TestCompressedCorpus(t *testing.T) {
	tests := []struct {
		sample string
		want   Format
	}{
		{"kieker-2.0-ascii-event-trace", Format{None, true}},
		{"kieker-2.0-binary-event-trace", Format{None, false}},
		{"kieker-2.0-compressed/deflate-ascii", Format{Deflate, true}},
		{"kieker-2.0-compressed/deflate-binary", Format{Deflate, false}},
		{"kieker-2.0-compressed/gzip-ascii", Format{Gzip, true}},
		{"kieker-2.0-compressed/gzip-binary", Format{Gzip, false}},
		{"kieker-2.0-compressed/gzip-binary-rotated", Format{Gzip, false}},
		{"kieker-2.0-compressed/zip-ascii", Format{Zip, true}},
		{"kieker-2.0-compressed/zip-ascii-rotated", Format{Zip, true}},
		{"kieker-2.0-compressed/zip-binary", Format{Zip, false}},
		{"kieker-2.0-compressed/xz-ascii", Format{XZ, true}},
		{"kieker-2.0-compressed/xz-binary", Format{XZ, false}},
		{"kieker-2.0-compressed/bzip2-ascii", Format{BZip2, true}},
		{"kieker-2.0-compressed/bzip2-binary", Format{BZip2, false}},
	}
	// The binary variants hold the same 404 records with the same string
	// ids, so they decompress to the same number of bytes: the size of
	// the plain .bin file.
	binarySize := int64(-1)
	for _, tt := range tests {
		t.Run(tt.sample, func(t *testing.T) {
			logs, err := Discover(testcorpus.Path(t, "kieker-logs", tt.sample))
			if err != nil {
				t.Fatal(err)
			}
			if len(logs) != 1 {
				t.Fatalf("%d logs, want 1", len(logs))
			}
			var data []byte
			for _, d := range logs[0].DataFiles() {
				b, f := readAll(t, d)
				if f != tt.want {
					t.Errorf("%s: format %v, want %v", d.Name, f, tt.want)
				}
				data = append(data, b...)
			}
			if tt.want.Text {
				if n := nonEmptyLines(data); n != 404 {
					t.Errorf("%d non-empty lines, want 404", n)
				}
				return
			}
			if binarySize < 0 {
				binarySize = int64(len(data))
			}
			if int64(len(data)) != binarySize {
				t.Errorf("%d decompressed bytes, want %d as the plain .bin", len(data), binarySize)
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Discover(dir); !errors.Is(err, ErrNoLog) {
		t.Errorf("empty directory: %v, want ErrNoLog", err)
	}
	file := filepath.Join(dir, "kieker-20200101-000000000-UTC-001.dat")
	writeFile(t, file, "$0;1;x\n")
	if _, err := Discover(file); !errors.Is(err, ErrNoLog) {
		t.Errorf("a data file: %v, want ErrNoLog", err)
	}
	if _, err := Discover(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: %v", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDataFileSelection checks which files of a log directory count as
// data: by name, or by content for renamed files.
func TestDataFileSelection(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "mylog")
	binFrame := string([]byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 2})
	files := map[string]string{
		"kieker.map":                            "$0=kieker.common.record.misc.KiekerMetadataRecord\n",
		"PROVENANCE.txt":                        "$0;looks like data but is a note\n",
		"notes.md":                              "# notes\n",
		".hidden.dat":                           "$0;1;x\n",
		"README":                                "This is a log.\n",
		"kieker.bin":                            binFrame,
		"renamed":                               "\n$0;1;renamed ascii\n",
		"legacy":                                "12;1;legacy line\n",
		"empty.dat":                             "",
		"empty":                                 "",
		"kieker.map.bak":                        "$0=kieker.common.record.misc.KiekerMetadataRecord\n",
		"kieker-20200101-000000000-UTC-002.dat": "$0;2;x\n",
		"kieker-20200101-000000000-UTC-001.dat": "$0;1;x\n",
		"kieker-20200101-000000000-UTC-003.gz":  "garbage, but its name says data",
	}
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.dat"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{root, dir} {
		logs, err := Discover(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) != 1 || logs[0].Path != dir {
			t.Fatalf("Discover(%s): %d logs", path, len(logs))
		}
		var names []string
		for _, d := range logs[0].DataFiles() {
			names = append(names, d.Name)
		}
		want := []string{
			"empty.dat",
			"kieker-20200101-000000000-UTC-001.dat",
			"kieker-20200101-000000000-UTC-002.dat",
			"kieker-20200101-000000000-UTC-003.gz",
			"kieker.bin",
			"legacy",
			"renamed",
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("data files (-want +got):\n%s", diff)
		}
	}
}

// TestDiscoverNested: logs below a directory come back sorted by path, and
// a log directory's own subdirectories are not searched.
func TestDiscoverNested(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"b/log2", "a/log1", "a/log1/inner", "c"} {
		writeFile(t, filepath.Join(root, d, "kieker.map"), "$0=x\n")
	}
	writeFile(t, filepath.Join(root, "old", "tpmon.map"), "0=x\n")
	logs, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range logs {
		rel, _ := filepath.Rel(root, l.Path)
		got = append(got, filepath.ToSlash(rel))
	}
	if diff := cmp.Diff([]string{"a/log1", "b/log2", "c", "old"}, got); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
}

// TestConsumedConcurrently reads Consumed from another goroutine while a
// log is read, as a progress bar does (run with -race).
func TestConsumedConcurrently(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	f, err := NewFiles(Options{Dir: dir, Compression: Gzip, MaxEntriesInFile: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := f.Write(sampleASCII(1000), 1000); err != nil {
			t.Fatal(i, err)
		}
	}
	f.Close()
	writeFile(t, filepath.Join(dir, MapFile), "$0=x\n")
	logs, err := Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := logs[0]
	done := make(chan struct{})
	seen := make(chan int64)
	go func() {
		last := int64(0)
		for {
			select {
			case <-done:
				seen <- last
				return
			default:
				if c := l.Consumed(); c < last || c > l.Size() {
					t.Errorf("Consumed %d after %d, Size %d", c, last, l.Size())
				} else {
					last = c
				}
			}
		}
	}()
	for _, d := range l.DataFiles() {
		readAll(t, d)
	}
	close(done)
	<-seen
	if l.Consumed() != l.Size() {
		t.Errorf("Consumed %d, Size %d", l.Consumed(), l.Size())
	}
}
