package jfr

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/record"
)

// jvm reads the chunk files of one directory (one JVM, or one file when
// only is set) in the order of their start times.
type jvm struct {
	dir    string
	only   string // read only this file name
	stream *codec.Stream
	// fromStart: read the chunks that exist now; else begin at the newest
	// data.
	fromStart bool
	started   bool // the first chunk has been chosen

	cur    *openChunk
	after  int64                 // start nanos of the last chunk done; the next has a larger one
	done   map[string]bool       // files read (or skipped)
	known  map[string]*chunkFile // chunk files listed, not read yet
	listed map[string]bool       // names in the last listing

	origin    record.Origin // of its records: Peer the directory, Session the JVM's pid
	exhausted bool          // nothing more will come
	files     int64         // chunk files opened
	activity  time.Time     // when a chunk was last opened or grew
}

// openChunk is the chunk being read.
type openChunk struct {
	f     *os.File
	path  string
	off   int64 // where the chunk starts in the file
	chunk *codec.Chunk
	h     codec.Header
}

func (r *run) newJVM(dir string, fromStart bool) *jvm {
	session := filepath.Base(dir)
	if pid := pidOf(dir); pid > 0 {
		session = strconv.Itoa(pid)
	}
	return &jvm{
		origin:    record.Origin{Peer: dir, Host: r.s.cfg.Host, Session: session},
		dir:       dir,
		fromStart: fromStart,
		stream:    codec.NewStream(codec.Options{Filter: r.s.filter, Types: r.s.types, Limits: r.s.cfg.Limits}),
		done:      map[string]bool{},
		known:     map[string]*chunkFile{},
		listed:    map[string]bool{},
		activity:  time.Now(),
	}
}

func (j *jvm) close() {
	if j.cur != nil {
		j.cur.f.Close()
		j.cur = nil
	}
	for _, cf := range j.known {
		cf.close()
	}
}

// headerRetries bounds the re-reads of a header the JVM is rewriting.
const headerRetries = 50

// readHeader reads a chunk header with the live protocol, retrying while
// the JVM rewrites it.
func readHeader(r io.ReaderAt) (codec.Header, error) {
	for i := 0; ; i++ {
		h, err := codec.ReadHeader(r)
		if !errors.Is(err, codec.ErrHeaderBusy) || i == headerRetries {
			return h, err
		}
		time.Sleep(time.Millisecond)
	}
}

// poll reads what the directory's chunks hold now: the open chunk's new
// data, then the following chunks, until nothing more is readable.
func (j *jvm) poll(r *run) error {
	for !j.exhausted && r.ctx.Err() == nil {
		if j.cur == nil {
			if !j.next(r) {
				if r.s.cfg.Follow && j.abandoned(r) {
					j.exhausted = true
				}
				return nil
			}
			j.activity = time.Now()
			continue
		}
		if r.s.cfg.Follow && j.only == "" {
			// Hold chunk files that appear open now: the JVM deletes
			// them when it exits.
			j.list(r)
		}
		progressed, err := j.read(r)
		if err != nil {
			return err
		}
		c := j.cur
		if c == nil {
			continue // it was broken: on to the next
		}
		if !c.chunk.Done() && r.s.cfg.Follow && j.stale(r, c) {
			// It will not grow: decode what it holds, then move on.
			r.s.log.Info("jfr: giving up a chunk its JVM stopped writing", "path", c.path)
			c.chunk.Settle()
			if _, err := j.read(r); err != nil {
				return err
			}
			if j.cur != nil {
				j.finish(r)
			}
			continue
		}
		if c.chunk.Done() || !r.s.cfg.Follow {
			j.finish(r)
			continue
		}
		if !progressed {
			return nil
		}
	}
	return nil
}

// read brings the open chunk up to its newest header and decodes its new
// events. It reports whether the header changed.
func (j *jvm) read(r *run) (bool, error) {
	c := j.cur
	sec := io.NewSectionReader(c.f, c.off, 1<<62)
	h, err := readHeader(sec)
	changed := false
	switch {
	case errors.Is(err, codec.ErrHeaderBusy):
		// Still being rewritten after the retries: next poll.
	case err != nil:
		r.s.report(fmt.Errorf("jfr %s: chunk at offset %d: %w", c.path, c.off, err))
		j.finishBroken()
		return false, nil
	case h != c.h:
		changed = true
		c.h = h
		j.activity = time.Now()
		if err := c.chunk.Update(h); err != nil {
			r.s.report(fmt.Errorf("jfr %s: %w", c.path, err))
		}
	}
	if !r.s.cfg.Follow {
		c.chunk.Settle() // read once: nothing will define missing constants later
	}
	for r.ctx.Err() == nil {
		_, err := c.chunk.Next(r.batch, r.s.cfg.BatchSize)
		if eerr := r.emit(false); eerr != nil {
			return changed, eerr
		}
		if errors.Is(err, io.EOF) {
			return changed, nil
		}
		if err != nil {
			r.s.report(fmt.Errorf("jfr %s: %w", c.path, err))
		}
	}
	return changed, nil
}

// finishBroken closes the open chunk's file, giving up on what is left
// of it.
func (j *jvm) finishBroken() {
	c := j.cur
	j.done[filepath.Base(c.path)] = true
	if c.h.StartNanos > j.after {
		j.after = c.h.StartNanos
	}
	c.f.Close()
	j.cur = nil
	if j.only != "" {
		j.exhausted = true
	}
}

// finish closes the chunk read to its end (or given up). A finished chunk
// followed by more bytes in its file (a recording of several chunks)
// continues with the next chunk there, also when this one was damaged but
// its header gave its size.
func (j *jvm) finish(r *run) {
	c := j.cur
	if c.h.StartNanos > j.after {
		j.after = c.h.StartNanos
	}
	next := c.off + c.h.ChunkSize
	if c.h.ChunkSize >= codec.HeaderSize && c.h.Finished() {
		if st, err := c.f.Stat(); err == nil && st.Size() >= next+codec.HeaderSize {
			if err := j.open(c.f, c.path, next); err != nil {
				r.s.report(err)
				j.finish(r)
			}
			return
		}
	}
	j.finishBroken()
}

// stale reports whether a live chunk stopped changing because its JVM is
// gone (killed: it never finishes the chunk).
func (j *jvm) stale(r *run, c *openChunk) bool {
	return !c.h.Finished() && j.abandoned(r)
}

// abandoned reports whether nothing happened in the directory for
// StaleAfter and its JVM is gone (the directory deleted, or the process
// of its name's pid not running).
func (j *jvm) abandoned(r *run) bool {
	if j.only != "" || time.Since(j.activity) < r.s.cfg.StaleAfter {
		return false
	}
	if _, err := os.Stat(j.dir); errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return processGone(pidOf(j.dir))
}

// maxPending bounds the chunk files held open before they are read.
const maxPending = 16

// next opens the chunk file with the next start time. It reports false
// when there is none yet.
//
// Chunk files are opened as soon as they are listed (up to maxPending)
// and kept open until read: a JVM that exits deletes its directory, and
// a chunk it began shortly before stays readable through the open file.
func (j *jvm) next(r *run) bool {
	gone, ok := j.list(r)
	if !ok {
		return false
	}
	var cands []*chunkFile
	for name, cf := range j.known {
		if cf.bad || (cf.ready && j.started && cf.start <= j.after) {
			cf.close()
			delete(j.known, name)
			j.done[name] = true
			continue
		}
		if cf.ready {
			cands = append(cands, cf)
		}
	}
	if len(cands) == 0 {
		if (gone || (j.only != "" && !j.listed[j.only])) && len(j.known) == 0 {
			j.exhausted = true
		}
		return false
	}
	sort.Slice(cands, func(a, b int) bool {
		if cands[a].start != cands[b].start {
			return cands[a].start < cands[b].start
		}
		return cands[a].path < cands[b].path
	})
	pick := cands[0]
	skip := false
	if !j.started && !j.fromStart {
		// Begin at the newest data: the newest chunk, from its current end.
		pick = cands[len(cands)-1]
		skip = true
	}
	j.started = true
	name := filepath.Base(pick.path)
	delete(j.known, name)
	for other, cf := range j.known { // older chunks skipped (StartNewest) are never read
		if cf.ready && cf.start < pick.start {
			cf.close()
			delete(j.known, other)
			j.done[other] = true
		}
	}
	f := pick.f
	if f == nil {
		var err error
		if f, err = os.Open(pick.path); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				r.s.report(fmt.Errorf("jfr %s: %w", pick.path, err))
			}
			j.done[name] = true
			return true
		}
	}
	if err := j.open(f, pick.path, 0); err != nil {
		r.s.report(err)
		j.finish(r)
		return true
	}
	if skip {
		j.cur.chunk.SkipToEnd()
	}
	return true
}

// list looks at the directory: new chunk files are registered, opened
// (up to maxPending) and their headers read when ready. gone reports that
// the directory no longer exists; ok is false when it could not be read.
func (j *jvm) list(r *run) (gone, ok bool) {
	entries, err := os.ReadDir(j.dir)
	gone = errors.Is(err, fs.ErrNotExist)
	if err != nil && !gone {
		r.s.report(fmt.Errorf("jfr %s: %w", j.dir, err))
		return false, false
	}
	clear(j.listed)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || (j.only == "" && !strings.HasSuffix(name, ".jfr")) || (j.only != "" && name != j.only) {
			continue
		}
		j.listed[name] = true
		if _, ok := j.known[name]; !ok && !j.done[name] {
			j.known[name] = &chunkFile{path: filepath.Join(j.dir, name)}
		}
	}
	for name := range j.done { // forget files that are gone
		if !j.listed[name] {
			delete(j.done, name)
		}
	}
	for name, cf := range j.known {
		if !j.listed[name] && cf.f == nil {
			delete(j.known, name) // deleted before it was opened
			continue
		}
		if !cf.ready {
			j.probe(r, cf)
		}
	}
	return gone, true
}

// chunkFile is a chunk file listed but not read yet.
type chunkFile struct {
	path  string
	f     *os.File // held open until read (nil beyond maxPending)
	ready bool     // its header was read: start is known, or bad is set
	start int64    // the chunk's start nanos
	bad   bool     // its header is not a chunk header: reported, skipped
}

func (cf *chunkFile) close() {
	if cf.f != nil {
		cf.f.Close()
		cf.f = nil
	}
}

// probe reads a chunk file's header to learn its start time. The file
// stays not ready while the JVM has not written a readable header yet.
func (j *jvm) probe(r *run, cf *chunkFile) {
	f := cf.f
	if f == nil {
		var err error
		if f, err = os.Open(cf.path); err != nil {
			return
		}
		if j.pending() < maxPending {
			cf.f = f
		} else {
			defer f.Close()
		}
	}
	h, err := readHeader(f)
	switch {
	case err == nil:
		cf.ready, cf.start = true, h.StartNanos
	case errors.Is(err, codec.ErrNotReady), errors.Is(err, codec.ErrHeaderBusy), errors.Is(err, io.ErrUnexpectedEOF):
	default:
		r.s.report(fmt.Errorf("jfr %s: %w", cf.path, err))
		cf.ready, cf.bad = true, true
	}
}

// pending counts the chunk files held open before they are read.
func (j *jvm) pending() int {
	n := 0
	for _, cf := range j.known {
		if cf.f != nil {
			n++
		}
	}
	return n
}

// open starts reading the chunk at off of f. It makes the chunk the open
// one even when it fails (then without a decoder), so that finish can go
// on after it.
func (j *jvm) open(f *os.File, path string, off int64) error {
	j.cur = &openChunk{f: f, path: path, off: off}
	j.activity = time.Now()
	sec := io.NewSectionReader(f, off, 1<<62)
	h, err := readHeader(sec)
	if err != nil {
		return fmt.Errorf("jfr %s: chunk at offset %d: %w", path, off, err)
	}
	j.cur.h = h
	if st, err := f.Stat(); err == nil && off+h.ChunkSize > st.Size() {
		return fmt.Errorf("jfr %s: chunk at offset %d is truncated: its header says %d bytes, the file has %d", path, off, h.ChunkSize, st.Size()-off)
	}
	chunk, err := j.stream.Open(sec, off, h)
	if err != nil {
		return fmt.Errorf("jfr %s: %w", path, err)
	}
	j.cur.chunk = chunk
	if off == 0 {
		j.files++
	}
	return nil
}
