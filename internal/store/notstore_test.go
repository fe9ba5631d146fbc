package store

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// dirNames returns the names under dir, recursively, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil && p != dir {
			names = append(names, p[len(dir)+1:])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestReadOnlyOpenOfNoStore: a query or check of a directory that holds
// no store is an error naming it (it found nothing before, as if the
// store were empty), and writes nothing there; nor does a rebuild make
// a store of it. A store's directory opened read-only is not written to
// either.
func TestReadOnlyOpenOfNoStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kieker.map"), []byte("$0=kieker.common.record.misc.KiekerMetadataRecord\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := dirNames(t, dir)
	if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("read-only open of a directory without a store: %v, want ErrNotStore", err)
	}
	if _, err := Check(dir, Options{}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("check of a directory without a store: %v, want ErrNotStore", err)
	}
	if _, err := Rebuild(dir, Options{}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("rebuild of a directory without a store: %v, want ErrNotStore", err)
	}
	if after := dirNames(t, dir); !slices.Equal(after, before) {
		t.Fatalf("the directory held %v, now %v", before, after)
	}

	// A store (traces written, then closed) opened read-only: found, and
	// nothing written.
	sdir := t.TempDir()
	s := open(t, sdir, Options{})
	var ts []*trace.Trace
	for i := range 10 {
		ts = append(ts, mkTrace(i, "alpha", 2, int64(1_000_000+i*1000), 100, false))
	}
	if _, err := s.Append(ts); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before = dirNames(t, sdir)
	r := open(t, sdir, Options{ReadOnly: true})
	if n, err := r.Count(); err != nil || n != 10 {
		t.Fatalf("read-only count %d, %v; want 10", n, err)
	}
	r.Close()
	if after := dirNames(t, sdir); !slices.Equal(after, before) {
		t.Fatalf("a read-only open changed the store: %v, now %v", before, after)
	}
}
