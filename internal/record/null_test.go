package record

import "testing"

// TestNullString: a null string reads as "", is not equal to "" (nor ""
// to it), IsNull tells it apart, and making one allocates nothing.
func TestNullString(t *testing.T) {
	null, empty := NullString(), StringValue("")
	if null.Str() != "" || !null.IsNull() || empty.IsNull() || StringValue("x").IsNull() || (Value{}).IsNull() {
		t.Fatalf("null %+v, empty %+v", null, empty)
	}
	if null.Equal(empty) || empty.Equal(null) || !null.Equal(NullString()) {
		t.Fatal("null and empty strings compare equal")
	}
	var sink Value
	if n := testing.AllocsPerRun(100, func() { sink = NullString() }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	_ = sink
}
