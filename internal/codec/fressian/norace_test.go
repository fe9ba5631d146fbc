//go:build !race

package fressian

import "testing"

// Allocation counts differ under the race detector; .ci/run runs the
// allocation tests once more without it.

func TestTagsInternedAllocs(t *testing.T) {
	in := hx(t, `EF E3 08 "LongTag1" 00`)
	d := NewDecoder(Options{})
	d.Reset(in)
	d.ReadStruct()
	allocs := testing.AllocsPerRun(100, func() {
		d.Reset(in)
		if tag, _ := d.ReadStruct(); tag != "LongTag1" {
			t.Fatal(tag)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per struct head", allocs)
	}
}
