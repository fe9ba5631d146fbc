package logdir

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rawEntry describes a zip entry to build by hand.
type rawEntry struct {
	name       string
	data       string
	deflate    bool
	descriptor bool // sizes and CRC in a data descriptor after the data
	noSig      bool // the descriptor without its optional signature
	zip64      bool // sizes in a zip64 extra field (and a zip64 descriptor)
}

// buildZip writes local headers and data, then (if central) a minimal
// central directory. It covers what archive/zip's writer cannot produce.
func buildZip(t testing.TB, entries []rawEntry, central bool) []byte {
	t.Helper()
	var b bytes.Buffer
	le := binary.LittleEndian
	for _, e := range entries {
		payload := []byte(e.data)
		method := uint16(0)
		if e.deflate {
			var c bytes.Buffer
			w, _ := flate.NewWriter(&c, flate.BestCompression)
			w.Write(payload)
			w.Close()
			payload, method = c.Bytes(), 8
		}
		crc := crc32.ChecksumIEEE([]byte(e.data))
		flags := uint16(0)
		hcrc, hc, hu := crc, uint32(len(payload)), uint32(len(e.data))
		if e.descriptor {
			flags |= 8
			hcrc, hc, hu = 0, 0, 0
		}
		var extra []byte
		if e.zip64 {
			hc, hu = 0xffffffff, 0xffffffff
			extra = le.AppendUint16(extra, 1)
			extra = le.AppendUint16(extra, 16)
			extra = le.AppendUint64(extra, uint64(len(e.data)))
			extra = le.AppendUint64(extra, uint64(len(payload)))
		}
		h := []byte("PK\x03\x04")
		h = le.AppendUint16(h, 20)
		h = le.AppendUint16(h, flags)
		h = le.AppendUint16(h, method)
		h = le.AppendUint32(h, 0) // time, date
		h = le.AppendUint32(h, hcrc)
		h = le.AppendUint32(h, hc)
		h = le.AppendUint32(h, hu)
		h = le.AppendUint16(h, uint16(len(e.name)))
		h = le.AppendUint16(h, uint16(len(extra)))
		b.Write(h)
		b.WriteString(e.name)
		b.Write(extra)
		b.Write(payload)
		if e.descriptor {
			if !e.noSig {
				b.WriteString("PK\x07\x08")
			}
			d := le.AppendUint32(nil, crc)
			if e.zip64 {
				d = le.AppendUint64(d, uint64(len(payload)))
				d = le.AppendUint64(d, uint64(len(e.data)))
			} else {
				d = le.AppendUint32(d, uint32(len(payload)))
				d = le.AppendUint32(d, uint32(len(e.data)))
			}
			b.Write(d)
		}
	}
	if central {
		// Enough of a central directory for the scanner to stop at.
		b.WriteString("PK\x01\x02")
		b.Write(make([]byte, 42))
		b.WriteString("PK\x05\x06")
		b.Write(make([]byte, 18))
	}
	return b.Bytes()
}

func decodeBytes(t testing.TB, name string, data []byte) ([]byte, Format, error) {
	t.Helper()
	s := NewStream(bytes.NewReader(data), name, Limits{})
	b, err := io.ReadAll(s)
	return b, s.Format, err
}

func TestZipStreaming(t *testing.T) {
	lines := strings.Repeat("$1;-1;some operation;PK\x07\x08 in the data;\n", 50)
	tests := []struct {
		name    string
		entries []rawEntry
		central bool
		want    string
		wantErr error
	}{
		{"stored", []rawEntry{{name: "a.dat", data: lines}}, true, lines, nil},
		{"deflated", []rawEntry{{name: "a.dat", data: lines, deflate: true}}, true, lines, nil},
		{"deflated with descriptor", []rawEntry{{name: "a.dat", data: lines, deflate: true, descriptor: true}}, true, lines, nil},
		{"descriptor without signature", []rawEntry{{name: "a.dat", data: lines, deflate: true, descriptor: true, noSig: true}}, true, lines, nil},
		{"stored with descriptor", []rawEntry{{name: "a.dat", data: lines, descriptor: true}}, true, lines, nil},
		{"zip64 sizes", []rawEntry{{name: "a.dat", data: lines, deflate: true, zip64: true}}, true, lines, nil},
		{"zip64 descriptor", []rawEntry{{name: "a.dat", data: lines, deflate: true, zip64: true, descriptor: true}}, true, lines, nil},
		{"stored zip64 descriptor", []rawEntry{{name: "a.dat", data: lines, zip64: true, descriptor: true}}, true, lines, nil},
		{"several entries, map and directory skipped", []rawEntry{
			{name: "dir/", data: ""},
			{name: "a.dat", data: "$0;1\n", deflate: true, descriptor: true},
			{name: "kieker.map", data: "$0=x\n", deflate: true, descriptor: true},
			{name: "b.dat", data: "$0;2\n", descriptor: true},
		}, true, "$0;1\n$0;2\n", nil},
		{"no central directory", []rawEntry{{name: "a.dat", data: lines, deflate: true, descriptor: true}}, false, lines, ErrTruncated},
		{"empty entry", []rawEntry{{name: "a.dat", data: ""}, {name: "b.dat", data: "$0;1\n"}}, true, "$0;1\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := buildZip(t, tt.entries, tt.central)
			got, f, err := decodeBytes(t, "x.zip", z)
			if f.Compression != Zip || !f.Text {
				t.Errorf("format %v", f)
			}
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("got %d bytes, want %d", len(got), len(tt.want))
			}
		})
	}
}

func TestZipCorrupt(t *testing.T) {
	good := buildZip(t, []rawEntry{{name: "a.dat", data: strings.Repeat("$0;1;x\n", 100), deflate: true, descriptor: true}}, true)
	// Flip a bit of the CRC in the descriptor.
	bad := bytes.Clone(good)
	i := bytes.Index(bad, []byte("PK\x07\x08"))
	bad[i+4] ^= 1
	_, _, err := decodeBytes(t, "bad.zip", bad)
	var e *Error
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &e) || e.Path != "bad.zip" || !strings.Contains(err.Error(), "CRC-32") {
		t.Errorf("error %v, want a corrupt CRC", err)
	}
	// An unknown method.
	bad = bytes.Clone(good)
	bad[8] = 12 // bzip2
	if _, _, err := decodeBytes(t, "bzip2.zip", bad); !errors.Is(err, ErrUnsupported) {
		t.Errorf("error %v, want ErrUnsupported", err)
	}
	// Encrypted.
	bad = bytes.Clone(good)
	bad[6] |= 1
	if _, _, err := decodeBytes(t, "enc.zip", bad); !errors.Is(err, ErrUnsupported) {
		t.Errorf("error %v, want ErrUnsupported", err)
	}
}

// threadZip writes a per-thread zip the way Kieker ≤1.12's
// AbstractZipWriterThread does: data entries in time order, kieker.map last.
func threadZip(t *testing.T, path string, entries [][2]string) {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range entries {
		w, err := zw.Create(e[0])
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, e[1])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestThreadZips(t *testing.T) {
	dir := t.TempDir()
	entries := [][2]string{
		{"kieker-20130101-000000000-UTC-000.dat", "$0;1;first\n"},
		{"kieker-20130101-000000000-UTC-001.dat", "$0;2;second\n"},
		{"kieker-20130101-000000001-UTC-000.dat", "$0;3;third\n"},
		{"kieker.map", "$0=kieker.common.record.misc.KiekerMetadataRecord\n"},
	}
	zip1 := filepath.Join(dir, "kieker-20130101-000000000-UTC-host-KIEKER-Thread-1.zip")
	zip2 := filepath.Join(dir, "kieker-20130101-000000000-UTC-host-KIEKER-Thread-2.zip")
	threadZip(t, zip1, entries)
	threadZip(t, zip2, entries[2:])
	writeFile(t, filepath.Join(dir, "other.zip"), "PK\x03\x04 but nothing else")
	threadZip(t, filepath.Join(dir, "unrelated.zip"), [][2]string{{"README", "hello"}})

	logs, err := Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 2 || logs[0].Path != zip1 || logs[1].Path != zip2 {
		t.Fatalf("logs %v", logs)
	}
	l := logs[0]
	var names []string
	var data []byte
	for _, d := range l.DataFiles() {
		names = append(names, d.Name)
		b, f := readAll(t, d)
		if f != (Format{Zip, true}) {
			t.Errorf("%s: format %v", d.Name, f)
		}
		data = append(data, b...)
	}
	if diff := cmp.Diff([]string{entries[0][0], entries[1][0], entries[2][0]}, names); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if string(data) != "$0;1;first\n$0;2;second\n$0;3;third\n" {
		t.Errorf("data %q", data)
	}
	if l.Consumed() != l.Size() {
		t.Errorf("Consumed %d, Size %d", l.Consumed(), l.Size())
	}
	m, err := l.OpenMap()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(m)
	m.Close()
	if err != nil || string(b) != entries[3][1] {
		t.Errorf("map %q, %v", b, err)
	}
	// Discover on the zip itself.
	if logs, err := Discover(zip2); err != nil || len(logs) != 1 || len(logs[0].DataFiles()) != 1 {
		t.Errorf("Discover(zip): %v, %v", logs, err)
	}
}

// TestThreadZipCrashed: a per-thread zip cut off by a crash has no central
// directory and no map; its data entries are still read, in stored order.
func TestThreadZipCrashed(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full.zip")
	threadZip(t, full, [][2]string{
		{"kieker-20130101-000000000-UTC-000.dat", "$0;1;first\n"},
		{"kieker-20130101-000000000-UTC-001.dat", strings.Repeat("$0;2;second\n", 100)},
		{"kieker.map", "$0=x\n"},
	})
	b, _ := os.ReadFile(full)
	cut := bytes.Index(b, []byte("kieker.map")) - 30 // the map's local header
	crashed := filepath.Join(dir, "kieker-20130101-000000000-UTC-host-KIEKER-Thread-1.zip")
	if err := os.WriteFile(crashed, b[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(full)
	logs, err := Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 {
		t.Fatalf("%d logs", len(logs))
	}
	files := logs[0].DataFiles()
	if len(files) != 1 {
		t.Fatalf("%d data files, want the whole zip", len(files))
	}
	s, err := files[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s)
	s.Close()
	if want := "$0;1;first\n" + strings.Repeat("$0;2;second\n", 100); string(got) != want {
		t.Errorf("got %d bytes, want %d", len(got), len(want))
	}
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("error %v, want ErrTruncated", err)
	}
	if _, err := logs[0].OpenMap(); !errors.Is(err, ErrNoMap) {
		t.Errorf("OpenMap: %v, want ErrNoMap", err)
	}
}
