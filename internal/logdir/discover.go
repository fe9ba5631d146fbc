package logdir

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
)

// Log is one Kieker log: a directory holding a kieker.map (or tpmon.map)
// and data files, or a per-thread zip of Kieker ≤1.12 holding both.
//
// A Log is safe for concurrent use once Discover has returned it: its data
// files may be opened and read from several goroutines, and Consumed may
// be read from any goroutine.
type Log struct {
	// Path is the log directory, or the zip file for a per-thread zip.
	Path string
	// Limits apply to the streams opened from this log; set before Open.
	Limits Limits

	mapPath  string    // the map file of a directory log
	mapEntry *zipEntry // the map of a per-thread zip read through its central directory
	mapAt    int64     // its data offset
	mapScan  bool      // a per-thread zip without central directory: find the map by scanning
	files    []DataFile
	size     int64
	consumed atomic.Int64
}

// DataFile is one data file of a log, or one data entry of a per-thread
// zip.
type DataFile struct {
	// Name is the file's base name, or the entry's name inside the zip.
	Name string
	// Path is the file on disk (the zip for an entry).
	Path string
	// Size is the number of compressed bytes reading it consumes: the file
	// size, or the entry's compressed size.
	Size int64

	log   *Log
	entry *zipEntry // an entry found through the zip's central directory
	at    int64     // the entry's data offset in the zip
	whole bool      // a per-thread zip without central directory, streamed whole
}

// DataFiles returns the log's data files in Kieker's order (CompareNames).
// For a per-thread zip whose central directory is missing (the writer
// crashed), it is one DataFile streaming every data entry in stored order,
// which is Kieker's writing order.
func (l *Log) DataFiles() []DataFile { return slices.Clone(l.files) }

// Binary tells whether the log's data is binary (by its first data
// file; a log without data files is not).
func (l *Log) Binary() (bool, error) {
	files := l.DataFiles()
	if len(files) == 0 {
		return false, nil
	}
	s, err := files[0].Open()
	if err != nil {
		return false, fmt.Errorf("kieker log: %w", err)
	}
	defer s.Close()
	return !s.Format.Text, nil
}

// Size returns the total compressed size of the data files, the end of
// the scale Consumed counts on.
func (l *Log) Size() int64 { return l.size }

// Consumed returns how many compressed bytes the streams opened from this
// log have read from disk so far (read-ahead included, so it may lead the
// decompressed data by a buffer; a file opened twice counts twice). Safe
// to call from any goroutine.
func (l *Log) Consumed() int64 { return l.consumed.Load() }

// OpenMap opens the log's kieker.map (tpmon.map for tpmon-era logs). For a
// per-thread zip cut off by a crash the map, which Kieker writes last, is
// usually missing: the error then wraps ErrNoMap.
func (l *Log) OpenMap() (io.ReadCloser, error) {
	switch {
	case l.mapPath != "":
		return os.Open(l.mapPath)
	case l.mapEntry != nil:
		f, err := os.Open(l.Path)
		if err != nil {
			return nil, err
		}
		r := io.NewSectionReader(f, l.mapAt, int64(l.mapEntry.csize))
		return newStream(r, f, l.Path+"!"+l.mapEntry.name, l.mapAt, "", nil, l.Limits, streamKind{entry: l.mapEntry, noSniff: true}), nil
	case l.mapScan:
		f, err := os.Open(l.Path)
		if err != nil {
			return nil, err
		}
		s := newStream(f, f, l.Path, 0, "", nil, l.Limits, streamKind{want: isMapEntry, one: true, need: ErrNoMap, noSniff: true})
		if _, err := s.out.Peek(1); err != nil && err != io.EOF {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s: %w", l.Path, ErrNoMap)
}

// Open opens the data file for reading its decompressed bytes. The format
// is decided by content, never by name: the compression by the file's
// magic bytes (Sniff), then ASCII (the first non-blank decompressed byte
// is '$') or binary; the .dat/.bin extension decides only for empty files.
// Open fails only if the file cannot be opened; problems with the content
// are reported by Read. The compressed bytes read count towards the log's
// Consumed.
func (d DataFile) Open() (*Stream, error) {
	var lim Limits
	var ctr *atomic.Int64
	if d.log != nil {
		lim, ctr = d.log.Limits, &d.log.consumed
	}
	f, err := os.Open(d.Path)
	if err != nil {
		return nil, err
	}
	switch {
	case d.entry != nil:
		r := io.NewSectionReader(f, d.at, int64(d.entry.csize))
		return newStream(r, f, d.Path+"!"+d.Name, d.at, d.Name, ctr, lim, streamKind{entry: d.entry}), nil
	case d.whole:
		return newStream(f, f, d.Path, 0, d.Name, ctr, lim, streamKind{want: isThreadDataEntry}), nil
	}
	return newStream(f, f, d.Path, 0, d.Name, ctr, lim, streamKind{}), nil
}

// Discover finds the Kieker logs at path. If path is a log directory (it
// holds kieker.map or tpmon.map) that is the one log, and its
// subdirectories are not searched. If path is a per-thread zip of Kieker
// ≤1.12, that zip is the log. Otherwise the subdirectories are walked
// (sorted, recursively; hidden entries skipped, symbolic links to
// directories not followed) and every log directory and per-thread zip
// found is returned in path order (depth first, names sorted at each
// level, so a/b comes before a/b-x). No log at all is an error wrapping
// ErrNoLog.
//
// The data files of a log directory are its regular files other than the
// map, hidden files and .txt/.md notes, that either carry a data name
// (….dat, ….bin, with or without a compression extension, or Kieker 2.0's
// kieker-…-<nnn>.gz/.df/.xz/.zip) or whose content sniffs as Kieker data
// (compressed, ASCII lines "$<id>;", or a binary frame starting with a
// small type id): people rename data files (kieker.bin).
func Discover(path string) ([]*Log, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var logs []*Log
	if fi.IsDir() {
		if err := walk(path, &logs); err != nil {
			return nil, err
		}
	} else {
		l, err := zipLog(path, fi.Size())
		if err != nil {
			return nil, err
		}
		if l != nil {
			logs = append(logs, l)
		}
	}
	if len(logs) == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNoLog)
	}
	return logs, nil
}

// walk adds the logs in dir, or dir itself if it is a log directory.
func walk(dir string, logs *[]*Log) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	l, err := dirLog(dir, entries)
	if err != nil {
		return err
	}
	if l != nil {
		*logs = append(*logs, l)
		return nil
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(dir, name)
		switch {
		case e.IsDir():
			if err := walk(p, logs); err != nil {
				return err
			}
		case e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0:
			fi, err := os.Stat(p)
			if err != nil || !fi.Mode().IsRegular() {
				continue // a dangling link, or a link to a directory
			}
			l, err := zipLog(p, fi.Size())
			if err != nil {
				return err
			}
			if l != nil {
				*logs = append(*logs, l)
			}
		}
	}
	return nil
}

// skipName reports names that are never data: hidden files and notes.
func skipName(name string) bool {
	lower := strings.ToLower(name)
	return strings.HasPrefix(name, ".") || strings.HasSuffix(lower, ".txt") || strings.HasSuffix(lower, ".md")
}

// dirLog returns the log of a directory holding a map, or nil.
func dirLog(dir string, entries []os.DirEntry) (*Log, error) {
	mapName := ""
	for _, name := range []string{MapFile, LegacyMapFile} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			mapName = name
			break
		}
	}
	if mapName == "" {
		return nil, nil
	}
	l := &Log{Path: dir, mapPath: filepath.Join(dir, mapName)}
	for _, e := range entries {
		name := e.Name()
		if name == MapFile || name == LegacyMapFile || skipName(name) || e.IsDir() {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if !dataName(name) {
			ok, err := sniffData(p, fi.Size())
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		l.files = append(l.files, DataFile{Name: name, Path: p, Size: fi.Size(), log: l})
		l.size += fi.Size()
	}
	slices.SortFunc(l.files, func(a, b DataFile) int { return CompareNames(a.Name, b.Name) })
	return l, nil
}

// dataSniffLen is how much of a file without a data name is read to decide
// whether it holds Kieker data.
const dataSniffLen = 512

// maxSniffTypeID bounds the first type id of a binary data file.
const maxSniffTypeID = 1 << 24

// sniffData reads the start of a file without a data name and reports
// whether it holds Kieker data: compressed, ASCII "$<id>;" (or a legacy
// "<digits>…;" line), or a binary frame whose 32-bit type id is below 2^24.
func sniffData(path string, size int64) (bool, error) {
	if size == 0 {
		return false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, dataSniffLen)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return false, err
	}
	return looksLikeData(buf[:n]), nil
}

func looksLikeData(b []byte) bool {
	if len(b) >= sniffLen && Sniff(b) != None {
		return true
	}
	i := 0
	for i < len(b) && isBlank(b[i]) {
		i++
	}
	if t := b[i:]; len(t) > 1 && t[0] == '$' {
		j := 1
		for j < len(t) && t[j] >= '0' && t[j] <= '9' {
			j++
		}
		return j > 1 && j < len(t) && t[j] == ';'
	}
	if legacyLine(b[i:]) {
		return true
	}
	return len(b) >= 12 && binary.BigEndian.Uint32(b) < maxSniffTypeID
}

// isThreadDataEntry reports the entries of a per-thread zip that hold
// data, as Kieker's FSZipReader reads them: kieker-….dat or kieker-….bin.
func isThreadDataEntry(name string) bool {
	return isDataEntry(name) && strings.HasPrefix(path.Base(name), "kieker-")
}

// zipLog returns the log of a per-thread zip of Kieker ≤1.12
// (kieker-<date>-UTC-<host>-<controller>-<thread>.zip holding kieker-….dat
// or .bin entries and, written last, kieker.map), or nil if the file is
// not one. The central directory gives the entries; without one (the
// writer crashed) the first local header must name a Kieker entry and the
// whole zip is streamed.
func zipLog(path string, size int64) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sigLocal) {
		return nil, nil
	}
	l := &Log{Path: path}
	zr, err := zip.NewReader(f, size)
	if err != nil {
		// No usable central directory: look at the first entry's name.
		name, ok := firstZipEntryName(f)
		if !ok || (!isMapEntry(name) && !isThreadDataEntry(name)) {
			return nil, nil
		}
		l.mapScan = true
		l.files = []DataFile{{Name: filepath.Base(path), Path: path, Size: size, log: l, whole: true}}
		l.size = size
		return l, nil
	}
	for _, zf := range zr.File {
		if zf.Mode().IsDir() || (!isMapEntry(zf.Name) && !isThreadDataEntry(zf.Name)) {
			continue
		}
		at, err := zf.DataOffset()
		if err != nil {
			return nil, fmt.Errorf("%s: entry %q: %w", path, zf.Name, err)
		}
		ent := &zipEntry{name: zf.Name, method: zf.Method, crc: zf.CRC32, csize: zf.CompressedSize64, usize: zf.UncompressedSize64}
		if ent.method != zipStored && ent.method != zipDeflated {
			return nil, &Error{Path: path, Offset: at, Err: fmt.Errorf("zip entry %q uses compression method %d: %w", ent.name, ent.method, ErrUnsupported)}
		}
		if isMapEntry(zf.Name) {
			l.mapEntry, l.mapAt = ent, at
			continue
		}
		l.files = append(l.files, DataFile{Name: zf.Name, Path: path, Size: int64(ent.csize), log: l, entry: ent, at: at})
		l.size += int64(ent.csize)
	}
	if l.mapEntry == nil && len(l.files) == 0 {
		return nil, nil
	}
	slices.SortFunc(l.files, func(a, b DataFile) int { return CompareNames(a.Name, b.Name) })
	return l, nil
}

// firstZipEntryName reads the name in the first local header.
func firstZipEntryName(f *os.File) (string, bool) {
	h := make([]byte, 30)
	if _, err := f.ReadAt(h, 0); err != nil {
		return "", false
	}
	n := int(binary.LittleEndian.Uint16(h[26:]))
	name := make([]byte, n)
	if _, err := f.ReadAt(name, 30); err != nil {
		return "", false
	}
	return string(name), true
}
