package kieker

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStrings(t *testing.T) {
	s := NewStrings(10)
	ids := []int32{0, 1, 5, -1, 1 << 30, 3000, 63}
	for _, id := range ids {
		if err := s.Set(id, "v"+itoa(int64(id))); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if v, ok := s.Get(id); !ok || v != "v"+itoa(int64(id)) {
			t.Errorf("Get(%d) = %q, %v", id, v, ok)
		}
	}
	for _, id := range []int32{2, 4, 6, 1<<30 + 1, -2, 2999} {
		if v, ok := s.Get(id); ok {
			t.Errorf("Get(%d) = %q for an unregistered id", id, v)
		}
	}
	if err := s.Set(5, "v5"); err != nil {
		t.Errorf("re-setting the same string: %v", err)
	}
	if err := s.Set(5, "other"); err == nil || !errors.Is(err, ErrConflict) || err.Error() != `string id 5 already registered as "v5", not "other": string id registered twice` {
		t.Errorf("conflict: %v", err)
	}
	if s.Len() != len(ids) {
		t.Errorf("Len %d", s.Len())
	}
	for i := 0; i < 3; i++ {
		if err := s.Set(int32(100+i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set(200, "y"); err == nil || !errors.Is(err, ErrLimit) {
		t.Errorf("over the limit: %v", err)
	}
	got := map[int32]string{}
	for id, v := range s.All() {
		got[id] = v
	}
	if len(got) != s.Len() {
		t.Errorf("All yields %d of %d", len(got), s.Len())
	}
}

func TestStringsDenseAfterSparse(t *testing.T) {
	s := NewStrings(0)
	// 5000 is too far ahead for the dense slice at first …
	if err := s.Set(5000, "far"); err != nil {
		t.Fatal(err)
	}
	// … until enough entries make the dense part reach past it.
	for id := int32(0); id < 6000; id++ {
		if id == 5000 {
			continue
		}
		if err := s.Set(id, "d"); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok := s.Get(5000); !ok || v != "far" {
		t.Errorf("Get(5000) = %q, %v", v, ok)
	}
	if err := s.Set(5000, "again"); !errors.Is(err, ErrConflict) {
		t.Errorf("conflict not seen across dense and sparse: %v", err)
	}
	n := 0
	for range s.All() {
		n++
	}
	if n != 6000 || s.Len() != 6000 {
		t.Errorf("All yields %d, Len %d", n, s.Len())
	}
}

func TestRegistry(t *testing.T) {
	var r Registry
	var got []Entry
	for _, s := range []string{"a", "b", "a", "", "c", "b"} {
		id, isNew := r.ID(s)
		if isNew {
			got = append(got, Entry{id, s})
		}
	}
	want := []Entry{{0, "a"}, {1, "b"}, {2, ""}, {3, "c"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if id, ok := r.Lookup("c"); !ok || id != 3 || r.Len() != 4 {
		t.Errorf("Lookup c = %d, %v; Len %d", id, ok, r.Len())
	}
	if _, ok := r.Lookup("zzz"); ok {
		t.Error("Lookup of an unknown string")
	}
}
