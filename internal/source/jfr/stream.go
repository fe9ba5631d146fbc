package jfr

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
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

	cur   *openChunk
	after int64                // start nanos of the last chunk done; the next has a larger one
	done  map[string]bool      // files read to their end
	known map[string]chunkInfo // start times of chunk files seen

	exhausted bool      // nothing more will come
	files     int64     // chunk files opened
	activity  time.Time // when a chunk was last opened or grew
}

// chunkInfo is what a chunk file's header said when it was listed.
type chunkInfo struct {
	startNanos int64
	bad        bool // its header is not a chunk header: reported, skipped
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
	return &jvm{
		dir:       dir,
		fromStart: fromStart,
		stream:    codec.NewStream(codec.Options{Filter: r.s.filter, Types: r.s.types, Limits: r.s.cfg.Limits}),
		done:      map[string]bool{},
		known:     map[string]chunkInfo{},
		activity:  time.Now(),
	}
}

func (j *jvm) close() {
	if j.cur != nil {
		j.cur.f.Close()
		j.cur = nil
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

// next opens the chunk file with the next start time. It reports false
// when there is none yet.
func (j *jvm) next(r *run) bool {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			j.exhausted = true
		} else {
			r.s.report(fmt.Errorf("jfr %s: %w", j.dir, err))
		}
		return false
	}
	type candidate struct {
		name  string
		start int64
	}
	var cands []candidate
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || (j.only == "" && !strings.HasSuffix(name, ".jfr")) || (j.only != "" && name != j.only) {
			continue
		}
		seen[name] = true
		if j.done[name] {
			continue
		}
		info, ok := j.known[name]
		if !ok {
			var ready bool
			info, ready = j.probe(r, filepath.Join(j.dir, name))
			if !ready {
				continue
			}
			j.known[name] = info
		}
		if info.bad || (j.started && info.startNanos <= j.after) {
			continue
		}
		cands = append(cands, candidate{name, info.startNanos})
	}
	for name := range j.known { // forget files that are gone
		if !seen[name] {
			delete(j.known, name)
			delete(j.done, name)
		}
	}
	if len(cands) == 0 {
		if j.only != "" && !seen[j.only] {
			j.exhausted = true
		}
		return false
	}
	sort.Slice(cands, func(a, b int) bool {
		if cands[a].start != cands[b].start {
			return cands[a].start < cands[b].start
		}
		return cands[a].name < cands[b].name
	})
	pick := cands[0]
	skip := false
	if !j.started && !j.fromStart {
		// Begin at the newest data: the newest chunk, from its current end.
		pick = cands[len(cands)-1]
		skip = true
	}
	j.started = true
	path := filepath.Join(j.dir, pick.name)
	f, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.s.report(fmt.Errorf("jfr %s: %w", path, err))
		}
		j.done[pick.name] = true
		return true
	}
	if err := j.open(f, path, 0); err != nil {
		r.s.report(err)
		j.finish(r)
		return true
	}
	if skip {
		j.cur.chunk.SkipToEnd()
	}
	return true
}

// probe reads a chunk file's header to learn its start time. ready is
// false while the JVM has not written a readable header yet.
func (j *jvm) probe(r *run, path string) (chunkInfo, bool) {
	f, err := os.Open(path)
	if err != nil {
		return chunkInfo{}, false
	}
	defer f.Close()
	h, err := readHeader(f)
	switch {
	case err == nil:
		return chunkInfo{startNanos: h.StartNanos}, true
	case errors.Is(err, codec.ErrNotReady), errors.Is(err, codec.ErrHeaderBusy), errors.Is(err, io.ErrUnexpectedEOF):
		return chunkInfo{}, false
	}
	r.s.report(fmt.Errorf("jfr %s: %w", path, err))
	return chunkInfo{bad: true}, true
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
