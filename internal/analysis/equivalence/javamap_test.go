package equivalence

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestJavaMapOrder replays the puts of testdata/chm-order.txt, written by
// a real java.util.concurrent.ConcurrentHashMap (testdata/ChmOrder.java,
// OpenJDK 17), and expects the same iteration order: random hashes,
// Long.hashCode of random trace ids, and bins holding up to 8 entries
// that resizes split.
func TestJavaMapOrder(t *testing.T) {
	f, err := os.Open("testdata/chm-order.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	ints := func(line string) []int {
		var out []int
		for w := range strings.FieldsSeq(line) {
			n, err := strconv.Atoi(w)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	cases := 0
	for sc.Scan() {
		hashes := ints(sc.Text())
		if !sc.Scan() {
			t.Fatal("odd number of lines")
		}
		want := ints(sc.Text())
		var m javaMap[int]
		for i, h := range hashes {
			m.put(int32(h), i)
		}
		var got []int
		m.each(func(i int) { got = append(got, i) })
		if !slices.Equal(got, want) {
			t.Fatalf("case %d (%d puts): order\n got %v\nwant %v", cases, len(hashes), got, want)
		}
		cases++
	}
	if cases != 300 {
		t.Fatalf("%d cases, want 300", cases)
	}
}
