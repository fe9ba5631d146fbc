package probe

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestNewOp(t *testing.T) {
	a := NewOp("void x.Y.z()", "x.Y")
	b := NewOp("void x.Y.z()", "x.Y")
	c := NewOp("void x.Y.z()", "x.Z")
	if a != b || a == c {
		t.Fatalf("handles %v %v %v", a, b, c)
	}
	if a.Operation() != "void x.Y.z()" || a.Class() != "x.Y" || c.Class() != "x.Z" {
		t.Errorf("names %q %q %q", a.Operation(), a.Class(), c.Class())
	}
	var zero Op
	if zero.Operation() != Unknown || zero.Class() != Unknown {
		t.Errorf("zero Op is %q %q", zero.Operation(), zero.Class())
	}
	if n := testing.AllocsPerRun(100, func() { NewOp("void x.Y.z()", "x.Y") }); n != 0 {
		t.Errorf("NewOp of a known pair allocates %v times", n)
	}
}

func TestNewOpConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	ids := make([][]Op, 8)
	for g := range ids {
		wg.Go(func() {
			for i := range 200 {
				ids[g] = append(ids[g], NewOp(fmt.Sprintf("op%d", i), "concurrent.C"))
			}
		})
	}
	wg.Wait()
	for g := range ids {
		for i, op := range ids[g] {
			if op != ids[0][i] || op.Operation() != fmt.Sprintf("op%d", i) {
				t.Fatalf("goroutine %d op %d: %v (%q), goroutine 0 has %v", g, i, op, op.Operation(), ids[0][i])
			}
		}
	}
}

func TestTableLimits(t *testing.T) {
	tb := newTable()
	tb.maxStrings = int(numReservedStrings) + 4
	tb.maxLen = 8
	id1 := tb.intern("short")
	long := "abcdefgäöü" // ä starts at byte 7 and ends at byte 9
	id2 := tb.intern(long)
	if tb.strs[id2] != "abcdefg" || !utf8.ValidString(tb.strs[id2]) {
		t.Errorf("cut to %q", tb.strs[id2])
	}
	if tb.intern(long) != id2 || tb.intern("abcdefg") != id2 || tb.intern("short") != id1 {
		t.Error("ids not stable")
	}
	bad := tb.intern("a\xffb")
	if tb.strs[bad] != "a\uFFFDb" || tb.intern("a\xffb") != bad {
		t.Errorf("invalid UTF-8 stored as %q", tb.strs[bad])
	}
	op := tb.addOp("opname", "short") // "opname" takes the last slot
	if op == opOverflow || tb.strs[tb.ops[op].op] != "opname" {
		t.Errorf("op %d", op)
	}
	if id := tb.intern("one too many"); id != strOverflow {
		t.Errorf("full table gave id %d (%q)", id, tb.strs[id])
	}
	if op := tb.addOp("new", "short"); op != opOverflow {
		t.Errorf("full table gave op %d", op)
	}
	if n := tb.overflowed.Load(); n != 2 {
		t.Errorf("overflowed %d, want 2", n)
	}
	// The lock-free snapshot catches up with the table.
	for range 100 {
		tb.intern("short")
	}
	if _, ok := tb.strIDs.get("short"); !ok {
		t.Error("snapshot never published")
	}
}

func TestSetLimits(t *testing.T) {
	defer SetLimits(Limits{})
	SetLimits(Limits{MaxStringLen: 16})
	id := names.intern(strings.Repeat("x", 100) + "set-limits")
	if s := names.strs[id]; s != strings.Repeat("x", 16) {
		t.Errorf("cut to %q", s)
	}
	SetLimits(Limits{MaxStrings: 1 << 30})
	if names.maxStrings != MaxMaxStrings {
		t.Errorf("max strings %d", names.maxStrings)
	}
}
