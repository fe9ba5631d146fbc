package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/objstore"
)

// Large is the size of the conformance suite's largest object: above an S3
// store's part size of 5MiB, so S3 uploads it in parts.
const Large = 12<<20 + 3

// OddKeys are keys with characters that need escaping somewhere (URLs,
// XML, shells) which every Store must keep as they are.
var OddKeys = []string{
	"sp ace/ü€/x+y%20?#&=;,'\"!@$*()[]{}~`^|<>.blk",
	"日本/語/データ",
	"-dash/_under/.dot",
	"back\\slash",
	"percent%2Fslash",
	"plus+and space",
	strings.Repeat("s", objstore.MaxSegmentLen) + "/x",
}

// BadKeys are keys no Store accepts.
var BadKeys = []string{
	"", "/abs", "a//b", "a/", "a/../b", "..", ".", "./a", "a/.",
	"nul\x00", "new\nline", "tab\tkey", "del\x7f", "bad\xffutf8",
	strings.Repeat("k", objstore.MaxSegmentLen+1),
	strings.Repeat("k/", objstore.MaxKeyLen/2) + "k",
}

// Conformance runs the contract of objstore.Store against the stores
// open returns: each call must give an empty store of its own.
func Conformance(t *testing.T, open func(t *testing.T) objstore.Store) {
	t.Run("PutGet", func(t *testing.T) {
		st := open(t)
		for _, n := range []int{0, 1, 4096, 1<<20 + 7} {
			key := fmt.Sprintf("put/get/%d", n)
			want := pattern(n, byte(n))
			mustPut(t, st, key, want)
			got, err := st.Get(ctx(t), key)
			if err != nil {
				t.Fatalf("get %s: %v", key, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("get %s: %d bytes differ from the %d put", key, len(got), len(want))
			}
		}
	})

	t.Run("Large", func(t *testing.T) {
		st := open(t)
		want := pattern(Large, 7)
		mustPut(t, st, "large", want)
		got, err := st.Get(ctx(t), "large")
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("get large: %d bytes, %v", len(got), err)
		}
		off := int64(5<<20 - 10) // across the first part boundary
		r, err := st.GetRange(ctx(t), "large", off, 100)
		if err != nil || !bytes.Equal(r, want[off:off+100]) {
			t.Fatalf("get range of large: %v", err)
		}
		objs, err := st.List(ctx(t), "")
		if err != nil || len(objs) != 1 || objs[0].Size != Large {
			t.Fatalf("list: %+v, %v", objs, err)
		}
	})

	// An object put in parts (a block as its writer keeps it) is their
	// concatenation: parts of odd sizes and empty ones, across an S3
	// part's boundary, and a small one.
	t.Run("Parts", func(t *testing.T) {
		st := open(t)
		want := pattern(Large, 3)
		cuts := []int{0, 0, 17, 1 << 20, 5<<20 - 1, 5<<20 - 1, 5<<20 + 2, 11 << 20, Large}
		var parts [][]byte
		for i := 1; i < len(cuts); i++ {
			parts = append(parts, want[cuts[i-1]:cuts[i]])
		}
		if err := st.Put(ctx(t), "parts", parts...); err != nil {
			t.Fatal(err)
		}
		got, err := st.Get(ctx(t), "parts")
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("get: %d bytes, %v", len(got), err)
		}
		if err := st.Put(ctx(t), "small", []byte("ab"), nil, []byte("c")); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Get(ctx(t), "small"); err != nil || string(got) != "abc" {
			t.Fatalf("get small: %q, %v", got, err)
		}
		if err := st.Put(ctx(t), "none"); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Get(ctx(t), "none"); err != nil || len(got) != 0 {
			t.Fatalf("get none: %q, %v", got, err)
		}
	})

	t.Run("NotExist", func(t *testing.T) {
		st := open(t)
		mustPut(t, st, "there", []byte("x"))
		_, err := st.Get(ctx(t), "missing/key")
		checkNotExist(t, err, "get", "missing/key")
		_, err = st.GetRange(ctx(t), "missing/key", 0, 1)
		checkNotExist(t, err, "get range", "missing/key")
		_, err = st.Get(ctx(t), "there/below")
		checkNotExist(t, err, "get", "there/below")
		_, err = st.Get(ctx(t), "ther")
		checkNotExist(t, err, "get", "ther")
	})

	t.Run("Range", func(t *testing.T) {
		st := open(t)
		data := pattern(1000, 3)
		mustPut(t, st, "r", data)
		for _, c := range []struct{ off, n int64 }{{0, 1000}, {0, 1}, {999, 1}, {10, 90}, {500, 500}, {7, 0}, {1000, 0}} {
			got, err := st.GetRange(ctx(t), "r", c.off, c.n)
			if err != nil {
				t.Fatalf("range %d+%d: %v", c.off, c.n, err)
			}
			if !bytes.Equal(got, data[c.off:c.off+c.n]) {
				t.Fatalf("range %d+%d: wrong bytes", c.off, c.n)
			}
		}
		for _, c := range []struct{ off, n int64 }{{1000, 1}, {999, 2}, {0, 1001}, {5000, 10}, {-1, 5}, {3, -1}} {
			got, err := st.GetRange(ctx(t), "r", c.off, c.n)
			if !errors.Is(err, objstore.ErrRange) {
				t.Fatalf("range %d+%d of 1000 bytes: %d bytes, %v; want ErrRange", c.off, c.n, len(got), err)
			}
			checkError(t, err, "get range", "r")
		}
		// An empty object has no byte to read.
		mustPut(t, st, "empty", nil)
		if _, err := st.GetRange(ctx(t), "empty", 0, 1); !errors.Is(err, objstore.ErrRange) {
			t.Fatalf("range of an empty object: %v; want ErrRange", err)
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		st := open(t)
		mustPut(t, st, "k", pattern(5000, 1))
		mustPut(t, st, "k", pattern(300, 2))
		got, err := st.Get(ctx(t), "k")
		if err != nil || !bytes.Equal(got, pattern(300, 2)) {
			t.Fatalf("after overwrite: %d bytes, %v", len(got), err)
		}
		objs := mustList(t, st, "")
		if len(objs) != 1 || objs[0].Size != 300 {
			t.Fatalf("list after overwrite: %+v", objs)
		}
	})

	t.Run("List", func(t *testing.T) {
		st := open(t)
		if objs := mustList(t, st, ""); len(objs) != 0 {
			t.Fatalf("a new store lists %+v", objs)
		}
		before := time.Now().Add(-time.Minute)
		keys := []string{"b", "a/2", "ab", "a/b/3", "a/1", "a.b", "c/d/e/f"}
		for i, k := range keys {
			mustPut(t, st, k, pattern(i+1, byte(i)))
		}
		after := time.Now().Add(time.Minute)
		all := mustList(t, st, "")
		for _, o := range all {
			if o.Modified.Before(before) || o.Modified.After(after) {
				t.Errorf("%s modified %v, not around now", o.Key, o.Modified)
			}
			i := slices.Index(keys, o.Key)
			if o.Size != int64(i+1) {
				t.Errorf("%s: size %d, want %d", o.Key, o.Size, i+1)
			}
		}
		for _, c := range []struct {
			prefix string
			want   []string
		}{
			{"", []string{"a.b", "a/1", "a/2", "a/b/3", "ab", "b", "c/d/e/f"}},
			{"a/", []string{"a/1", "a/2", "a/b/3"}},
			{"a", []string{"a.b", "a/1", "a/2", "a/b/3", "ab"}},
			{"a/b", []string{"a/b/3"}},
			{"a/b/", []string{"a/b/3"}},
			{"c/d/", []string{"c/d/e/f"}},
			{"c/d/e/f", []string{"c/d/e/f"}},
			{"zz", nil},
			{"zz/yy/", nil},
			{"a//", nil},
			{"../", nil},
		} {
			if diff := cmp.Diff(c.want, keysOf(mustList(t, st, c.prefix))); diff != "" {
				t.Errorf("list %q (-want +got):\n%s", c.prefix, diff)
			}
		}
	})

	t.Run("ListMany", func(t *testing.T) {
		// More keys than one S3 page (1000).
		st := open(t)
		const n = 1100
		var want []string
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 16)
		for i := range n {
			k := fmt.Sprintf("many/%05d", i)
			want = append(want, k)
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := st.Put(ctx(t), k, []byte(k)); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, keysOf(mustList(t, st, "many/"))); diff != "" {
			t.Fatalf("list of %d keys (-want +got):\n%s", n, diff)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		st := open(t)
		mustPut(t, st, "d/1", []byte("one"))
		mustPut(t, st, "d/2", []byte("two"))
		for range 2 { // deleting twice is fine
			if err := st.Delete(ctx(t), "d/1"); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
		if err := st.Delete(ctx(t), "never/was"); err != nil {
			t.Fatalf("delete of a missing key: %v", err)
		}
		if err := st.Delete(ctx(t), "d"); err != nil { // a "folder", not an object
			t.Fatalf("delete of a prefix: %v", err)
		}
		_, err := st.Get(ctx(t), "d/1")
		checkNotExist(t, err, "get", "d/1")
		if diff := cmp.Diff([]string{"d/2"}, keysOf(mustList(t, st, ""))); diff != "" {
			t.Fatalf("list after delete (-want +got):\n%s", diff)
		}
		if got, err := st.Get(ctx(t), "d/2"); err != nil || string(got) != "two" {
			t.Fatalf("the other key: %q, %v", got, err)
		}
		if err := st.Delete(ctx(t), "d/2"); err != nil {
			t.Fatal(err)
		}
		if objs := mustList(t, st, ""); len(objs) != 0 {
			t.Fatalf("after deleting everything: %+v", objs)
		}
		mustPut(t, st, "d/3", []byte("again")) // the emptied "folder" takes keys again
		if got, err := st.Get(ctx(t), "d/3"); err != nil || string(got) != "again" {
			t.Fatalf("put after delete: %q, %v", got, err)
		}
	})

	t.Run("VanishedBetweenListAndGet", func(t *testing.T) {
		st := open(t)
		mustPut(t, st, "blocks/b1/data", []byte("data"))
		objs := mustList(t, st, "blocks/")
		if len(objs) != 1 {
			t.Fatalf("list: %+v", objs)
		}
		if err := st.Delete(ctx(t), "blocks/b1/data"); err != nil { // another process's retention
			t.Fatal(err)
		}
		_, err := st.Get(ctx(t), objs[0].Key)
		checkNotExist(t, err, "get", "blocks/b1/data")
		_, err = st.GetRange(ctx(t), objs[0].Key, 0, 2)
		checkNotExist(t, err, "get range", "blocks/b1/data")
	})

	t.Run("OddKeys", func(t *testing.T) {
		st := open(t)
		for i, k := range OddKeys {
			mustPut(t, st, k, []byte(k))
			got, err := st.Get(ctx(t), k)
			if err != nil || string(got) != k {
				t.Fatalf("key %d %q: got %q, %v", i, k, got, err)
			}
			r, err := st.GetRange(ctx(t), k, 1, 2)
			if err != nil || string(r) != k[1:3] {
				t.Fatalf("range of key %q: %q, %v", k, r, err)
			}
		}
		want := append([]string(nil), OddKeys...)
		slices.Sort(want)
		if diff := cmp.Diff(want, keysOf(mustList(t, st, ""))); diff != "" {
			t.Fatalf("list (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{OddKeys[0]}, keysOf(mustList(t, st, "sp ace/ü€/x+y%20?#"))); diff != "" {
			t.Fatalf("list by an odd prefix (-want +got):\n%s", diff)
		}
		for _, k := range OddKeys {
			if err := st.Delete(ctx(t), k); err != nil {
				t.Fatalf("delete %q: %v", k, err)
			}
		}
		if objs := mustList(t, st, ""); len(objs) != 0 {
			t.Fatalf("after deleting the odd keys: %+v", objs)
		}
	})

	t.Run("BadKeys", func(t *testing.T) {
		st := open(t)
		for _, k := range BadKeys {
			if err := st.Put(ctx(t), k, []byte("x")); !errors.Is(err, objstore.ErrKey) {
				t.Errorf("put %q: %v; want ErrKey", k, err)
			}
			if _, err := st.Get(ctx(t), k); !errors.Is(err, objstore.ErrKey) {
				t.Errorf("get %q: %v; want ErrKey", k, err)
			}
			if _, err := st.GetRange(ctx(t), k, 0, 1); !errors.Is(err, objstore.ErrKey) {
				t.Errorf("get range %q: %v; want ErrKey", k, err)
			}
			if err := st.Delete(ctx(t), k); !errors.Is(err, objstore.ErrKey) {
				t.Errorf("delete %q: %v; want ErrKey", k, err)
			}
		}
		if objs := mustList(t, st, ""); len(objs) != 0 {
			t.Fatalf("bad keys stored something: %+v", objs)
		}
	})

	t.Run("Atomic", func(t *testing.T) {
		// Readers never see a part of an object: every Get returns one
		// whole version (its size and its byte), while a writer replaces
		// the object with versions of other sizes.
		st := open(t)
		size := func(v int) int { return 64<<10 + (v%5)*(300<<10) + v }
		mustPut(t, st, "atomic", pattern(size(0), 0))
		const versions = 25
		var done atomic.Bool
		var reads atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !done.Load() {
					b, err := st.Get(context.Background(), "atomic")
					if err != nil {
						errs <- fmt.Errorf("get during overwrites: %w", err)
						return
					}
					reads.Add(1)
					if len(b) == 0 {
						errs <- errors.New("get during overwrites: empty")
						return
					}
					v := int(b[0])
					if len(b) != size(v) || !bytes.Equal(b, pattern(size(v), byte(v))) {
						errs <- fmt.Errorf("get during overwrites: %d bytes starting with version %d, not that version (%d bytes)", len(b), v, size(v))
						return
					}
				}
			}()
		}
		for v := 1; v <= versions; v++ {
			mustPut(t, st, "atomic", pattern(size(v), byte(v)))
		}
		// Keep writing until the readers read (a loaded machine may not
		// have scheduled them yet).
		deadline := time.Now().Add(time.Minute)
		for v := versions + 1; reads.Load() < 10 && time.Now().Before(deadline); v++ {
			mustPut(t, st, "atomic", pattern(size(v%200), byte(v%200)))
		}
		done.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if reads.Load() < 10 {
			t.Fatalf("only %d reads during the overwrites", reads.Load())
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		st := open(t)
		mustPut(t, st, "k", []byte("v"))
		c, cancel := context.WithCancel(context.Background())
		cancel()
		if err := st.Put(c, "k2", []byte("v")); err == nil {
			t.Error("put with a cancelled context succeeded")
		}
		if _, err := st.Get(c, "k"); err == nil {
			t.Error("get with a cancelled context succeeded")
		}
		if _, err := st.List(c, ""); err == nil {
			t.Error("list with a cancelled context succeeded")
		}
		if _, err := st.Get(ctx(t), "k2"); !errors.Is(err, objstore.ErrNotExist) {
			t.Errorf("the cancelled put stored k2: %v", err)
		}
	})
}

// pattern returns n bytes starting with v, the rest a pseudo-random
// sequence seeded by v and n.
func pattern(n int, v byte) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(v), uint64(n)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if n > 0 {
		b[0] = v
	}
	return b
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func mustPut(t *testing.T, st objstore.Store, key string, data []byte) {
	t.Helper()
	if err := st.Put(ctx(t), key, data); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

func mustList(t *testing.T, st objstore.Store, prefix string) []objstore.Object {
	t.Helper()
	objs, err := st.List(ctx(t), prefix)
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return objs
}

func keysOf(objs []objstore.Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Key)
	}
	return ks
}

// checkNotExist checks err is ErrNotExist in an *objstore.Error naming
// the operation and the key.
func checkNotExist(t *testing.T, err error, op, key string) {
	t.Helper()
	if !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("%s %q: %v; want ErrNotExist", op, key, err)
	}
	checkError(t, err, op, key)
}

// CheckError checks err is an *objstore.Error of the operation on key
// whose text names the key.
func CheckError(t *testing.T, err error, op, key string) { t.Helper(); checkError(t, err, op, key) }

func checkError(t *testing.T, err error, op, key string) {
	t.Helper()
	var e *objstore.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s %q: %T %v is not an *objstore.Error", op, key, err, err)
	}
	if e.Op != op || e.Key != key || e.Backend == "" {
		t.Fatalf("%s %q: the error says backend %q, op %q, key %q", op, key, e.Backend, e.Op, e.Key)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) || !strings.Contains(err.Error(), e.Backend) {
		t.Fatalf("%s %q: %q does not name the backend and the key", op, key, err.Error())
	}
}
