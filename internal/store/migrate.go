package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tracebridge/tracebridge/internal/store/block"
)

// A store of version 1 (docs/STORE.md, "Version 1"): DIR/index (Pebble:
// the symbols of each host under 's' host(4) symbol(4)) and
// DIR/hosts/<id>/host (the host's name) beside its segments
// DIR/hosts/<id>/<n>.seg. Converting reads every segment's traces with
// the host's dictionary and writes them as blocks; the old files are kept
// under DIR/v1-migrated until the user deletes them.
const (
	v1Index    = "index"
	v1Hosts    = "hosts"
	v1NameFile = "host"
	v1Kept     = "v1-migrated"
)

// MigrateResult says what converting a store of version 1 did.
type MigrateResult struct {
	Hosts, Segments, Traces, Blocks int
	// Lost names what could not be carried over (unreadable segments,
	// traces naming symbols the index lost), with the reason.
	Lost []string
	// Kept is where the old files are now.
	Kept string
}

// isV1 reports whether dir holds a store of version 1: its Pebble index
// and its hosts' segment directories.
func isV1(dir string) bool {
	ms, _ := filepath.Glob(filepath.Join(dir, v1Index, "MANIFEST-*"))
	st, err := os.Stat(filepath.Join(dir, v1Hosts))
	return len(ms) > 0 && err == nil && st.IsDir()
}

// Migrate converts a store of version 1 in dir (no process may hold it
// open), calling progress with the segment bytes read and their total.
func Migrate(dir string, o Options, progress func(done, total int64)) (MigrateResult, error) {
	if !isV1(dir) {
		return MigrateResult{}, fmt.Errorf("store %s: not a store of version 1 (no %s)", dir, filepath.Join(dir, v1Index))
	}
	o.ReadOnly = false
	s, err := newStore(dir, o.withDefaults())
	if err != nil {
		return MigrateResult{}, err
	}
	defer s.cancel()
	return s.migrate(progress)
}

// migrate converts a store of version 1 at Open.
func migrate(dir string, s *Store, log *slog.Logger) (MigrateResult, error) {
	log.Info("store: converting a store of version 1 to blocks", "dir", dir)
	last := int64(-1)
	res, err := s.migrate(func(done, total int64) {
		if pct := done * 10 / max(total, 1); pct != last {
			last = pct
			log.Info("store: converting", "done_bytes", done, "total_bytes", total)
		}
	})
	if err == nil {
		log.Info("store: converted", "hosts", res.Hosts, "traces", res.Traces, "blocks", res.Blocks, "lost", len(res.Lost), "old_files", res.Kept)
	}
	return res, err
}

func (s *Store) migrate(progress func(done, total int64)) (MigrateResult, error) {
	var res MigrateResult
	dir := s.dir
	db, err := pebble.Open(filepath.Join(dir, v1Index), &pebble.Options{ReadOnly: true, Logger: quietLogger{}})
	if err != nil {
		return res, fmt.Errorf("the version 1 index: %w", err)
	}
	syms, err := v1Symbols(db)
	if err == nil {
		s.legacy, err = v1HostRecords(db)
	}
	db.Close()
	if err != nil {
		return res, fmt.Errorf("the version 1 index: %w", err)
	}
	hostsDir := filepath.Join(dir, v1Hosts)
	es, err := os.ReadDir(hostsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, err
	}
	type seg struct {
		host string
		id   uint32
		path string
		size int64
	}
	var segs []seg
	var total int64
	for _, e := range es {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || !e.IsDir() {
			continue
		}
		name, err := os.ReadFile(filepath.Join(hostsDir, e.Name(), v1NameFile))
		if err != nil {
			res.Lost = append(res.Lost, fmt.Sprintf("%s: no host name file; its segments skipped", filepath.Join(hostsDir, e.Name())))
			continue
		}
		res.Hosts++
		files, _ := os.ReadDir(filepath.Join(hostsDir, e.Name()))
		for _, f := range files {
			if strings.HasSuffix(f.Name(), ".seg") {
				st, err := f.Info()
				if err != nil {
					continue
				}
				segs = append(segs, seg{strings.TrimSpace(string(name)), uint32(id), filepath.Join(hostsDir, e.Name(), f.Name()), st.Size()})
				total += st.Size()
			}
		}
	}
	sort.Slice(segs, func(i, j int) bool {
		if segs[i].host != segs[j].host {
			return segs[i].host < segs[j].host
		}
		return segs[i].path < segs[j].path
	})
	var done int64
	var h *head
	var w *block.Writer
	flush := func() error {
		if h == nil || w.Traces() == 0 {
			return nil
		}
		data, st, err := w.FinishParts(h.syms.names, h.filter.bloom())
		if err != nil {
			return err
		}
		m := &block.Meta{Version: block.Version, ID: h.id, Host: h.host, Created: s.opt.Now().UTC(), MinStart: st.MinStart, MaxEnd: st.MaxEnd,
			Traces: st.Traces, Spans: st.Spans, Size: st.Size, FooterCRC: st.FooterCRC}
		h.fillMeta(m)
		if err := s.putBlock(s.ctx, data, m); err != nil {
			return err
		}
		res.Blocks++
		h = nil
		return nil
	}
	for _, sg := range segs {
		res.Segments++
		if h != nil && h.host != sg.host {
			if err := flush(); err != nil {
				return res, err
			}
		}
		table := syms[sg.id]
		if table == nil {
			table = newSymbols() // the index lost them: its traces are reported lost
		}
		f, err := os.Open(sg.path)
		if err != nil {
			res.Lost = append(res.Lost, fmt.Sprintf("%s: %v", sg.path, err))
			continue
		}
		_, scanErr := scanBlocks(f, segHeaderSize, func(off int64, ch blockHeader, raw []byte) error {
			pl, err := parsePayload(raw, ch.version)
			if err != nil {
				return fmt.Errorf("%w: %v", errTorn, err)
			}
			// Symbols a chunk defined that the index lacks (a crash came
			// between the segment's sync and the index's).
			for i, name := range pl.syms {
				if id := pl.firstSym + uint64(i); id == uint64(len(table.names)) {
					table.names = append(table.names, strings.Clone(name))
				}
			}
			for i, body := range pl.traces {
				t, err := decodeTrace(body, table)
				if err != nil {
					res.Lost = append(res.Lost, fmt.Sprintf("%s: offset %d, trace %d: %v", sg.path, off, i, err))
					continue
				}
				if h == nil {
					h = newHeadValue(block.NewID(s.opt.Now()), sg.host, "", s.opt.Now())
					w = block.NewWriter(s.opt.PageSize)
				}
				b := bytes.Clone(h.enc.encodeTrace(t))
				row := summarize(t, h.syms)
				h.note(t, &row, len(body))
				w.Add(b, row, appendTerms(nil, t)...)
				res.Traces++
				if int64(w.Size()) >= s.opt.HeadSize {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			return nil
		})
		f.Close()
		if scanErr != nil {
			if !errors.Is(scanErr, errTorn) {
				return res, scanErr
			}
			res.Lost = append(res.Lost, fmt.Sprintf("%s: %v (the rest of the segment is unreadable)", sg.path, scanErr))
		}
		done += sg.size
		if progress != nil {
			progress(done, total)
		}
	}
	if err := flush(); err != nil {
		return res, err
	}
	// The old files are kept aside, not deleted: the user removes them.
	kept := filepath.Join(dir, v1Kept)
	if err := os.MkdirAll(kept, 0o755); err != nil {
		return res, err
	}
	for _, name := range []string{v1Index, v1Hosts} {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(kept, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, err
		}
	}
	res.Kept = kept
	return res, nil
}

// v1HostRecords reads the host records of a version 1 index ('H' name →
// JSON).
func v1HostRecords(db *pebble.DB) ([][]byte, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'H'}, UpperBound: []byte{'H' + 1}})
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); legacyRecord(v) {
			out = append(out, bytes.Clone(v))
		}
	}
	return out, it.Close()
}

// v1Symbols reads every host's dictionary of a version 1 index.
func v1Symbols(db *pebble.DB) (map[uint32]*symbols, error) {
	out := map[uint32]*symbols{}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'s'}, UpperBound: []byte{'s' + 1}})
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			continue
		}
		host, id := binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint32(k[5:])
		t := out[host]
		if t == nil {
			t = newSymbols()
			out[host] = t
		}
		for uint32(len(t.names)) < id {
			t.names = append(t.names, "") // a gap: traces naming it decode to ""
		}
		if uint32(len(t.names)) == id {
			t.names = append(t.names, string(it.Value()))
		}
	}
	return out, it.Close()
}

// quietLogger keeps Pebble's informational output out of the bridge's log.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
