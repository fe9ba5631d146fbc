package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// CheckResult is what Check found.
type CheckResult struct {
	Hosts, Segments, Blocks, Traces int
	// Problems name the file, offset and reason of everything wrong:
	// corrupt or torn blocks, traces the index lacks, index entries
	// pointing nowhere.
	Problems []string
}

// problemf adds a problem.
func (res *CheckResult) problemf(format string, args ...any) {
	res.Problems = append(res.Problems, fmt.Sprintf(format, args...))
}

// eachSegment counts p and its segments and calls fn with each segment
// that opens (one that does not is a problem); fn closes f.
func (res *CheckResult) eachSegment(p *partition, fn func(n uint32, f *os.File, path string)) error {
	res.Hosts++
	segs, err := p.segments()
	if err != nil {
		return err
	}
	for _, n := range segs {
		res.Segments++
		path := filepath.Join(p.dir, segName(n))
		f, err := os.Open(path)
		if err != nil {
			res.problemf("%s: %v", path, err)
			continue
		}
		fn(n, f, path)
	}
	return nil
}

// Check verifies a store no process holds open: every block's checksum
// and contents, and that the index and the segments agree.
func Check(dir string) (CheckResult, error) {
	s, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		return CheckResult{}, err
	}
	defer s.Close()
	var res CheckResult
	seen := map[[2]uint64]bool{}
	for _, p := range s.partitions() {
		err := res.eachSegment(p, func(_ uint32, f *os.File, path string) {
			if _, err := readSegHeader(f); err != nil {
				res.problemf("%s: %v", path, err)
				f.Close()
				return
			}
			end, err := scanBlocks(f, segHeaderSize, func(off int64, h blockHeader, raw []byte) error {
				res.Blocks++
				pl, err := parsePayload(raw, h.version)
				if err != nil {
					res.problemf("%s: offset %d: %v", path, off, err)
					return nil
				}
				p.smu.RLock()
				defer p.smu.RUnlock()
				for i, body := range pl.traces {
					t, err := decodeTrace(body, p.syms)
					if err != nil {
						res.problemf("%s: offset %d: trace %d: %v", path, off, i, err)
						continue
					}
					res.Traces++
					seen[[2]uint64{t.ID.Hi, t.ID.Lo}] = true
					v, c, err := s.db.Get(keyTrace(t.ID))
					if err != nil {
						res.problemf("%s: offset %d: trace %s is not in the index (tracebridge store rebuild fixes it)", path, off, t.ID)
						continue
					}
					c.Close()
					_ = v
				}
				return nil
			})
			if err != nil {
				st, _ := f.Stat()
				res.problemf("%s: offset %d: %v (%d bytes unreadable)", path, end, err, st.Size()-end)
			}
			f.Close()
		})
		if err != nil {
			return res, err
		}
	}
	// Index entries that point nowhere.
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kTrace}, UpperBound: []byte{kTrace + 1}})
	if err != nil {
		return res, err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 17 {
			continue
		}
		id := idFromKey(k)
		if !seen[[2]uint64{id.Hi, id.Lo}] {
			res.problemf("index: trace %s points to no readable block", id)
		}
	}
	return res, it.Close()
}

// Rebuild rebuilds the index of a store no process holds open from its
// segments (zico's rebuildIndex): partition records are kept (recreated from
// the partitions' name files when missing), everything else is indexed
// again. Unreadable blocks are reported and skipped.
func Rebuild(dir string) (CheckResult, error) {
	var res CheckResult
	hostsDir := filepath.Join(dir, "hosts")
	es, err := os.ReadDir(hostsDir)
	if err != nil {
		return res, fmt.Errorf("store %s: %w", dir, err)
	}
	db, err := pebble.Open(filepath.Join(dir, "index"), &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return res, err
	}
	// Keep the partition records and the host counter; drop the rest.
	b := db.NewBatch()
	b.DeleteRange([]byte{0}, []byte{kHostRc}, nil)
	b.DeleteRange([]byte{kHostRc + 1}, []byte{kMeta}, nil)
	b.DeleteRange([]byte{kMeta + 1}, []byte{0xff}, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		db.Close()
		return res, err
	}
	db.Close()
	s, err := Open(dir, Options{})
	if err != nil {
		return res, err
	}
	defer s.Close()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.batch = s.db.NewBatch()
	var maxID uint32
	for _, e := range es {
		id64, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || !e.IsDir() {
			continue
		}
		id := uint32(id64)
		maxID = max(maxID, id)
		p := s.partitionByID(id)
		if p == nil {
			name, err := os.ReadFile(filepath.Join(hostsDir, e.Name(), hostNameFile))
			if err != nil {
				res.problemf("%s: no host record and no name file; skipped", filepath.Join(hostsDir, e.Name()))
				continue
			}
			p = s.addPartition(id, strings.TrimSpace(string(name)))
			if err := s.putPartition(p); err != nil {
				return res, err
			}
		}
		p.syms = newSymbols()
		p.enc.syms = p.syms
		p.bmu.Lock()
		p.blocks = nil
		p.bmu.Unlock()
		err = res.eachSegment(p, func(n uint32, f *os.File, path string) {
			end, err := scanBlocks(f, segHeaderSize, func(off int64, h blockHeader, raw []byte) error {
				pl, err := parsePayload(raw, h.version)
				if err == nil {
					err = p.defineSymbols(pl)
				}
				if err == nil {
					before := s.recovery.Traces
					err = s.indexBlock(p, n, off, h, pl, true)
					res.Traces += s.recovery.Traces - before
				}
				if err != nil {
					res.problemf("%s: offset %d: %v", path, off, err)
					return errors.Join(errTorn, err) // later blocks' symbols may depend on it
				}
				res.Blocks++
				return nil
			})
			if err != nil {
				st, _ := f.Stat()
				res.problemf("%s: offset %d: %v (%d bytes skipped)", path, end, err, st.Size()-end)
			}
			s.batch.Set(keyMark(p.id), markValue(n, end), nil)
			f.Close()
		})
		if err != nil {
			return res, err
		}
	}
	if v, c, err := s.db.Get(keyNextHost); err == nil {
		c.Close()
		if len(v) == 4 && uint32(v[0])<<24|uint32(v[1])<<16|uint32(v[2])<<8|uint32(v[3]) <= maxID {
			s.batch.Set(keyNextHost, []byte{byte((maxID + 1) >> 24), byte((maxID + 1) >> 16), byte((maxID + 1) >> 8), byte(maxID + 1)}, nil)
		}
	} else {
		s.batch.Set(keyNextHost, []byte{byte((maxID + 1) >> 24), byte((maxID + 1) >> 16), byte((maxID + 1) >> 8), byte(maxID + 1)}, nil)
	}
	err = s.batch.Commit(pebble.Sync)
	s.batch = s.db.NewBatch()
	return res, err
}

// hostNameFile holds a partition's host name beside its segments, for
// Rebuild.
const hostNameFile = "host"
