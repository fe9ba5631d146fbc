package logdir

import (
	"fmt"
	"strings"
	"time"
)

// MapFile is the name of a log's string registry; LegacyMapFile the one of
// the tpmon era.
const (
	MapFile       = "kieker.map"
	LegacyMapFile = "tpmon.map"
)

// DirName returns the name Kieker ≥1.13 gives a log directory:
// kieker-<yyyyMMdd-HHmmss>-<nanoTime>-UTC-<hostname>-<controller>, the date
// in UTC. nanoTime is Java's System.nanoTime() there, only used to make the
// name unique. An empty hostname gives "…-UTC--KIEKER", as Kieker writes it.
// Path separators, NUL and other control characters in hostname and
// controller (which may come from untrusted input) become '_', so the name
// is always one path element.
func DirName(now time.Time, nanoTime int64, hostname, controller string) string {
	t := now.UTC()
	return fmt.Sprintf("kieker-%04d%02d%02d-%02d%02d%02d-%d-UTC-%s-%s",
		t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second(), nanoTime, namePart(hostname), namePart(controller))
}

func namePart(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, s)
	if s == "." || s == ".." {
		return strings.Repeat("_", len(s))
	}
	return s
}

// DataFileName returns the name of data file number counter (1, 2, …),
// Kieker ≥1.14's kieker-<yyyyMMdd-HHmmssSSS>-UTC-<counter %03d>.dat, or
// .bin for binary. A compression appends its extension after .dat/.bin
// (….dat.gz, ….bin.xz, ….dat.df, ….dat.zip): Kieker itself replaces
// .dat/.bin by the compression extension, but then its own directory reader
// skips the file, while it does read ….dat.gz.
func DataFileName(now time.Time, counter int, binary bool, c Compression) string {
	t := now.UTC()
	ext := ".dat"
	if binary {
		ext = ".bin"
	}
	return fmt.Sprintf("kieker-%04d%02d%02d-%02d%02d%02d%03d-UTC-%03d%s%s",
		t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e6,
		counter, ext, c.Ext())
}

// CompareNames orders data file names the way Kieker's readers do, by
// name, except that the counter after "-UTC-" compares as a number.
//
// The rule: in both namings, Kieker ≥1.13 kieker-<yyyyMMdd-HHmmssSSS>-UTC-
// <nnn>.<ext> and Kieker ≤1.12 kieker-<yyyyMMdd-HHmmssSSS>-UTC-<nnn>-
// <thread>.<ext>, the digits right after the first "-UTC-" (up to '-', '.'
// or the end) are the counter. Kieker formats it with %03d, so it grows to
// four digits after 999; names are compared with that counter left-padded
// with zeros to 20 digits, which puts -1000 after -999 and otherwise keeps
// plain byte order (the fixed-width date first, then the counter, then the
// rest). Names that compare equal that way fall back to plain byte order.
// In ≥1.14 logs the counter numbers the rotated files; in ≤1.12 logs it
// counts files started within the same millisecond.
func CompareNames(a, b string) int {
	if c := strings.Compare(sortKey(a), sortKey(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

const counterWidth = 20

func sortKey(name string) string {
	i := strings.Index(name, "-UTC-")
	if i < 0 {
		return name
	}
	start := i + len("-UTC-")
	end := start
	for end < len(name) && name[end] >= '0' && name[end] <= '9' {
		end++
	}
	if end == start || end-start >= counterWidth || (end < len(name) && name[end] != '-' && name[end] != '.') {
		return name
	}
	return name[:start] + strings.Repeat("0", counterWidth-(end-start)) + name[start:]
}

// compressionExts are the extensions a compressed data file may carry.
var compressionExts = []string{".df", ".gz", ".zip", ".xz", ".bz2"}

// textHint tells from a data file's name whether it is ASCII (.dat) or
// binary (.bin), looking under a compression extension; ok is false when
// the name says neither. Content decides; this is only for empty files.
func textHint(name string) (text, ok bool) {
	base := strings.ToLower(name)
	for _, ext := range compressionExts {
		if strings.HasSuffix(base, ext) {
			base = strings.TrimSuffix(base, ext)
			break
		}
	}
	switch {
	case strings.HasSuffix(base, ".dat"):
		return true, true
	case strings.HasSuffix(base, ".bin"):
		return false, true
	}
	return false, false
}

// dataName reports whether a name carries a data file extension: .dat or
// .bin, optionally followed by a compression extension, or Kieker 2.0's
// bare kieker-…-<nnn>.<compression ext>.
func dataName(name string) bool {
	if _, ok := textHint(name); ok {
		return true
	}
	lower := strings.ToLower(name)
	if !strings.HasPrefix(lower, "kieker-") {
		return false
	}
	for _, ext := range compressionExts {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	return false
}
