package logdir

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDirName(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	tests := []struct {
		name       string
		now        time.Time
		nano       int64
		host, ctrl string
		want       string
	}{
		// The names of two real logs in the corpus.
		{"teastore, empty host", time.Date(2023, 11, 10, 13, 10, 7, 818e6, time.UTC), 818299477149, "", "KIEKER",
			"kieker-20231110-131007-818299477149-UTC--KIEKER"},
		{"kieker 2.0", time.Date(2026, 11, 22, 1, 58, 24, 0, time.UTC), 2590989397804, "realclients-host", "KIEKER",
			"kieker-20261122-015824-2590989397804-UTC-realclients-host-KIEKER"},
		{"local time is converted to UTC", time.Date(2024, 1, 1, 0, 30, 0, 0, berlin), 5, "h", "c",
			"kieker-20231231-233000-5-UTC-h-c"},
		{"negative nanoTime", time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC), -42, "h", "c",
			"kieker-20240203-040506--42-UTC-h-c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DirName(tt.now, tt.nano, tt.host, tt.ctrl); got != tt.want {
				t.Errorf("DirName = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDataFileName(t *testing.T) {
	now := time.Date(2023, 11, 10, 13, 10, 7, 269_999_999, time.UTC)
	tests := []struct {
		counter int
		binary  bool
		c       Compression
		want    string
	}{
		{1, false, None, "kieker-20231110-131007269-UTC-001.dat"}, // the teastore log's file
		{1, true, None, "kieker-20231110-131007269-UTC-001.bin"},
		{2, false, Gzip, "kieker-20231110-131007269-UTC-002.dat.gz"},
		{3, true, Gzip, "kieker-20231110-131007269-UTC-003.bin.gz"},
		{4, false, Deflate, "kieker-20231110-131007269-UTC-004.dat.df"},
		{5, true, Zip, "kieker-20231110-131007269-UTC-005.bin.zip"},
		{6, false, XZ, "kieker-20231110-131007269-UTC-006.dat.xz"},
		{999, false, None, "kieker-20231110-131007269-UTC-999.dat"},
		{1000, true, XZ, "kieker-20231110-131007269-UTC-1000.bin.xz"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := DataFileName(now, tt.counter, tt.binary, tt.c); got != tt.want {
				t.Errorf("DataFileName = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCompareNames(t *testing.T) {
	tests := []struct {
		name string
		want []string // in order
	}{
		{"counter past 999 with one date", []string{
			"kieker-20260101-000000000-UTC-001.dat",
			"kieker-20260101-000000000-UTC-002.dat",
			"kieker-20260101-000000000-UTC-999.dat",
			"kieker-20260101-000000000-UTC-1000.dat",
			"kieker-20260101-000000000-UTC-1001.dat",
			"kieker-20260101-000000000-UTC-10000.dat",
		}},
		{"date first, then counter", []string{
			"kieker-20261122-020824803-UTC-001.gz",
			"kieker-20261122-020824835-UTC-002.gz",
			"kieker-20261122-020824841-UTC-003.gz",
			"kieker-20261122-020824841-UTC-1000.dat.gz",
			"kieker-20261123-000000000-UTC-004.gz",
		}},
		{"≤1.12 names with thread", []string{
			"kieker-20170805-132412202-UTC-000-Thread-1.dat",
			"kieker-20170805-132412202-UTC-000-Thread-2.dat",
			"kieker-20170805-132412202-UTC-001-Thread-1.dat",
			"kieker-20170805-132412202-UTC-1000-Thread-1.dat",
			"kieker-20170805-132412203-UTC-000-Thread-1.dat",
		}},
		{"other names by bytes", []string{
			"a.bin",
			"kieker-x-UTC-abc.dat",
			"kieker.bin",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(10) {
				got := slices.Clone(tt.want)
				rand.New(rand.NewPCG(seed, 1)).Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
				slices.SortFunc(got, CompareNames)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Fatalf("order (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestParseCompression(t *testing.T) {
	tests := []struct {
		in      string
		want    Compression
		wantErr error
	}{
		{"", None, nil},
		{"none", None, nil},
		{"GZIP", Gzip, nil},
		{"deflate", Deflate, nil},
		{"zip", Zip, nil},
		{"xz", XZ, nil},
		{"kieker.monitoring.writer.compression.NoneCompressionFilter", None, nil},
		{"kieker.monitoring.writer.compression.DeflateCompressionFilter", Deflate, nil},
		{"kieker.monitoring.writer.compression.GZipCompressionFilter", Gzip, nil},
		{"kieker.monitoring.writer.compression.ZipCompressionFilter", Zip, nil},
		{"kieker.monitoring.writer.compression.XZCompressionFilter", XZ, nil},
		{"kieker.monitoring.writer.filesystem.compression.GZipCompressionFilter", Gzip, nil}, // Kieker 1.14's package
		{"kieker.monitoring.writer.compression.BZip2CompressionFilter", None, ErrUnsupported},
		{"bzip2", None, ErrUnsupported},
		{"lz4", None, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCompression(tt.in)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr == errAny && err == nil, tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	_, err := ParseCompression("kieker.monitoring.writer.compression.BZip2CompressionFilter")
	if want := "reads bzip2 logs but does not write them"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bzip2 error %v does not say %q", err, want)
	}
}

var errAny = errors.New("any error")

func TestSniff(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want Compression
	}{
		{"empty", nil, None},
		{"ascii", []byte("$0;-1;2.0;KIEKER"), None},
		{"binary", []byte{0, 0, 0, 0, 0xff, 0xff}, None},
		{"zlib 78 9c", []byte{0x78, 0x9c, 1, 2, 3, 4}, Deflate},
		{"zlib 78 da", []byte{0x78, 0xda, 1, 2, 3, 4}, Deflate},
		{"zlib 78 01", []byte{0x78, 0x01, 1, 2, 3, 4}, Deflate},
		{"78 with a bad header checksum", []byte{0x78, 0x9d, 1, 2, 3, 4}, None},
		{"zlib with preset dictionary", []byte{0x78, 0xbb, 1, 2, 3, 4}, None},
		{"text 80 is no zlib (preset dictionary bit)", []byte("80;1;2"), None},
		{"gzip", []byte{0x1f, 0x8b, 8, 0, 0, 0}, Gzip},
		{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0}, XZ},
		{"bzip2", []byte("BZh91AY&SY"), BZip2},
		{"BZh0 is no bzip2", []byte("BZh0xx"), None},
		{"zip", []byte("PK\x03\x04\x14\x00"), Zip},
		{"empty zip", []byte("PK\x05\x06\x00\x00"), Zip},
		{"gzip cut short", []byte{0x1f}, Gzip},
		{"xz cut short", []byte{0xfd, '7', 'z'}, XZ},
		{"zip cut short", []byte("PK\x03"), Zip},
		{"bzip2 cut short", []byte("BZ"), BZip2},
		{"zlib cut short", []byte{0x78}, Deflate},
		{"short text", []byte("$1;"), None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sniff(tt.in); got != tt.want {
				t.Errorf("Sniff(% x) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
