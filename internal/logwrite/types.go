package logwrite

import (
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TypesFilePrefix begins the names of the IRL files a Writer puts beside
// kieker.map: tracebridge-types.<package>.irl, one per Java package of the
// record types the log holds that Kieker's built-in catalogue lacks (JFR
// event types, user types, tracebridge.trace.SpanRecord). Readers
// (internal/source/kiekerlog) load every *.irl file of a log directory, so
// such a log reads without -L.
const TypesFilePrefix = "tracebridge-types"

// typesDoc heads every IRL file the writer writes.
const typesDoc = `Record types of this Kieker log that Kieker's built-in catalogue lacks,
written by tracebridge beside kieker.map. Names in backquotes are
tracebridge's extension of IRL (JFR's flattened field names).`

// describer keeps the IRL files of one log directory up to date with the
// record types written to it. Types are described before the first data
// that uses them is written, as kieker.map entries are.
type describer struct {
	builtin *record.Catalog
	seen    map[*record.Type]bool           // types checked in this directory
	byName  map[string]*record.Type         // types described, by name
	pkgs    map[string][]*record.Type       // described types per package, in order of appearance
	files   map[string]string               // package → file name
	dirty   map[string]bool                 // packages whose file must be written
	skips   map[string]bool                 // names reported as not described
	skipped func(t *record.Type, err error) // a type IRL cannot describe
}

func newDescriber(skipped func(*record.Type, error)) *describer {
	d := &describer{builtin: record.Builtin(), skipped: skipped}
	d.reset()
	return d
}

// reset forgets the directory (a new log directory begins).
func (d *describer) reset() {
	d.seen = map[*record.Type]bool{}
	d.byName = map[string]*record.Type{}
	d.pkgs = map[string][]*record.Type{}
	d.files = map[string]string{}
	d.dirty = map[string]bool{}
	d.skips = map[string]bool{}
}

// skip reports a type that is not described, once per name.
func (d *describer) skip(t *record.Type, err error) {
	if !d.skips[t.Name] {
		d.skips[t.Name] = true
		d.skipped(t, err)
	}
}

// unseen yields the records of recs (index and type) whose type the
// directory has not seen yet: at least once per such type, not again while
// it is one of the last two types checked.
func (d *describer) unseen(recs []record.Record) iter.Seq2[int, *record.Type] {
	return func(yield func(int, *record.Type) bool) {
		// The last two types checked: records of two types often
		// alternate (Before and After events), and a map lookup per
		// record would cost more than writing it.
		var last, prev *record.Type
		for i := range recs {
			t := recs[i].Type
			if t == last || t == prev {
				continue
			}
			prev, last = last, t
			if d.seen[t] {
				continue
			}
			if !yield(i, t) {
				return
			}
		}
	}
}

// unseenTypes is unseen for the types of a batch of frames only
// (record.Frames.Types).
func (d *describer) unseenTypes(ts []*record.Type) iter.Seq2[int, *record.Type] {
	return func(yield func(int, *record.Type) bool) {
		var last, prev *record.Type
		for i, t := range ts {
			if t == last || t == prev {
				continue
			}
			prev, last = last, t
			if d.seen[t] {
				continue
			}
			if !yield(i, t) {
				return
			}
		}
	}
}

// seenAll reports whether the directory has seen every type of the
// batch of frames only f: by its tally of types, or, without one, a pass
// over its types.
func (d *describer) seenAll(f *record.Frames) bool {
	if len(f.Counts) == 0 {
		for range d.unseenTypes(f.Types) {
			return false
		}
		return true
	}
	for _, c := range f.Counts {
		if !d.seen[c.Type] {
			return false
		}
	}
	return true
}

// conflict returns the index of the first record whose type has the name
// of a type already described with other fields (the same event type from
// two JVM versions): a log describes one layout per name. -1: none.
func (d *describer) conflict(unseen iter.Seq2[int, *record.Type]) int {
	var fresh map[string]*record.Type // types new in recs, by name
	for i, t := range unseen {
		old := d.byName[t.Name]
		if old == nil {
			if old = fresh[t.Name]; old == nil {
				if fresh == nil {
					fresh = map[string]*record.Type{}
				}
				fresh[t.Name] = t
				continue
			}
		}
		if !old.SameFields(t) {
			return i
		}
	}
	return -1
}

// add notes the types of recs that are new to the directory.
func (d *describer) add(unseen iter.Seq2[int, *record.Type]) {
	for _, t := range unseen {
		d.seen[t] = true
		if b := d.builtin.Lookup(t.Name); b != nil {
			if b.Name != t.Name || !b.SameFields(t) {
				d.skip(t, fmt.Errorf("record type %s: named like Kieker's built-in type %s but with other fields %s", t.Name, b.Name, t))
			}
			continue
		}
		if old := d.byName[t.Name]; old != nil {
			continue // the same layout under another *Type
		}
		if err := irl.Describable(t); err != nil {
			d.skip(t, err)
			continue
		}
		pkg, _ := irl.SplitName(t.Name)
		d.byName[t.Name] = t
		d.pkgs[pkg] = append(d.pkgs[pkg], t)
		d.dirty[pkg] = true
	}
}

// flush writes the IRL files of the packages that gained types, each
// replaced whole (written beside it, then renamed), so a reader sees the
// old or the new file, never a part.
func (d *describer) flush(dir string) error {
	for pkg := range d.dirty {
		name := d.fileName(pkg)
		src, err := irl.Describe(pkg, d.pkgs[pkg], typesDoc)
		if err != nil {
			return err // Describable was checked
		}
		path := filepath.Join(dir, name)
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, src, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return err
		}
		delete(d.dirty, pkg)
	}
	return nil
}

// fileName returns the IRL file of a package: TypesFilePrefix.<package>.irl
// with characters unfit for file names replaced, made unique.
func (d *describer) fileName(pkg string) string {
	if n, ok := d.files[pkg]; ok {
		return n
	}
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '$' {
			return r
		}
		return '_'
	}, pkg)
	if len(clean) > 100 {
		clean = clean[:100]
	}
	name := TypesFilePrefix + "." + clean + ".irl"
	for i := 2; d.taken(name); i++ {
		name = fmt.Sprintf("%s.%s-%d.irl", TypesFilePrefix, clean, i)
	}
	d.files[pkg] = name
	return name
}

func (d *describer) taken(name string) bool {
	for _, n := range d.files {
		if n == name {
			return true
		}
	}
	return false
}
