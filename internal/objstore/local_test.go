package objstore_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestLocalConformance(t *testing.T) {
	objstoretest.Conformance(t, func(t *testing.T) objstore.Store {
		l, err := objstore.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

func TestLocalTempFiles(t *testing.T) {
	dir := t.TempDir()
	l, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Put(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// What a crash in the middle of a Put leaves behind.
	debris := filepath.Join(dir, ".objstore-tmp", "put-12345")
	inFlight := filepath.Join(dir, ".objstore-tmp", "put-67890") // another process's Put
	for _, f := range []string{debris, inFlight} {
		if err := os.WriteFile(f, []byte("half an obj"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-objstore.StaleTemp - time.Minute)
	if err := os.Chtimes(debris, old, old); err != nil {
		t.Fatal(err)
	}
	objs, err := l.List(ctx, "")
	if err != nil || len(objs) != 1 || objs[0].Key != "a/b" {
		t.Fatalf("list with a temporary file: %+v, %v", objs, err)
	}
	if _, err := objstore.NewLocal(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(debris); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("NewLocal left the stale temporary file: %v", err)
	}
	if _, err := os.Stat(inFlight); err != nil {
		t.Fatalf("NewLocal removed a recent temporary file: %v", err)
	}
	for _, k := range []string{".objstore-tmp", ".objstore-tmp/x"} {
		if err := l.Put(ctx, k, []byte("x")); !errors.Is(err, objstore.ErrKey) {
			t.Fatalf("put %q: %v; want ErrKey", k, err)
		}
	}
	// Files are where the keys say, and hold the bytes.
	if b, err := os.ReadFile(filepath.Join(dir, "a", "b")); err != nil || string(b) != "x" {
		t.Fatalf("a/b on disk: %q, %v", b, err)
	}
}

func TestLocalDeleteRemovesEmptyDirs(t *testing.T) {
	dir := t.TempDir()
	l, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"x/y/z", "x/w"} {
		if err := l.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Delete(ctx, "x/y/z"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x", "y")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("x/y is still there: %v", err)
	}
	if err := l.Delete(ctx, "x/w"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("x is still there: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the root went too: %v", err)
	}
}

func TestLocalConflict(t *testing.T) {
	l, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Put(ctx, "a", []byte("file")); err != nil {
		t.Fatal(err)
	}
	err = l.Put(ctx, "a/b", []byte("below"))
	if err == nil || !strings.Contains(err.Error(), "conflicts") || !strings.Contains(err.Error(), `"a/b"`) {
		t.Fatalf("put a/b over the object a: %v", err)
	}
	if err := l.Put(ctx, "c/d", []byte("below")); err != nil {
		t.Fatal(err)
	}
	if err := l.Put(ctx, "c", []byte("file")); err == nil || !strings.Contains(err.Error(), "conflicts") {
		t.Fatalf("put c over the folder c/: %v", err)
	}
	if b, err := l.Get(ctx, "a"); err != nil || string(b) != "file" {
		t.Fatalf("a after the conflicts: %q, %v", b, err)
	}
	if _, err := l.Get(ctx, "c"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("get of the folder c: %v; want ErrNotExist", err)
	}
	objs, err := l.List(ctx, "")
	if err != nil || len(objs) != 2 {
		t.Fatalf("list: %+v, %v", objs, err)
	}
}

// A file removed by another process between List and Get.
func TestLocalVanished(t *testing.T) {
	dir := t.TempDir()
	l, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Put(ctx, "blocks/1/meta", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	objs, err := l.List(ctx, "blocks/")
	if err != nil || len(objs) != 1 {
		t.Fatalf("list: %+v, %v", objs, err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "blocks")); err != nil {
		t.Fatal(err)
	}
	_, err = l.Get(ctx, objs[0].Key)
	if !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("get: %v", err)
	}
	objstoretest.CheckError(t, err, "get", "blocks/1/meta")
	if !strings.Contains(err.Error(), "local "+dir) {
		t.Fatalf("%v does not name the directory", err)
	}
}

// versioned is the payload of put number i: its number, then bytes that
// depend on it, of a length that varies with it.
func versioned(i int) []byte {
	b := make([]byte, 8+(i%7)*40000+i%13)
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < len(b); j++ {
		b[j] = byte(i*31 + j)
	}
	return b
}

// TestLocalKill kills (SIGKILL) a process in the middle of its Puts, three
// times at random moments: afterwards every object is one whole version,
// never a torn one, every acknowledged Put is there (or a later one), and
// the killed Put's temporary file is not listed.
func TestLocalKill(t *testing.T) {
	if dir := os.Getenv("OBJSTORE_KILL_DIR"); dir != "" {
		l, err := objstore.NewLocal(dir)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for i := 0; ; i++ {
			if err := l.Put(context.Background(), fmt.Sprintf("k/%d", i%10), versioned(i)); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			fmt.Println(i) // acknowledged
		}
	}
	dir := t.TempDir()
	acked := map[string]int{}
	for round := range 3 {
		stop := 20 + rand.IntN(200)
		cmd := exec.Command(os.Args[0], "-test.run=^TestLocalKill$")
		cmd.Env = append(os.Environ(), "OBJSTORE_KILL_DIR="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			i, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("round %d: the child says %q", round, sc.Text())
			}
			acked[fmt.Sprintf("k/%d", i%10)] = i
			if n++; n == stop {
				break
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		if n < stop {
			t.Fatalf("round %d: the child stopped after %d puts", round, n)
		}
		l, err := objstore.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := l.List(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 10 {
			t.Fatalf("round %d: %d objects: %+v", round, len(objs), objs)
		}
		for _, o := range objs {
			b, err := l.Get(context.Background(), o.Key)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < 8 {
				t.Fatalf("round %d: %s: %d bytes, torn", round, o.Key, len(b))
			}
			v := int(binary.BigEndian.Uint64(b))
			if !bytes.Equal(b, versioned(v)) || fmt.Sprintf("k/%d", v%10) != o.Key {
				t.Fatalf("round %d: %s: %d bytes, not version %d whole", round, o.Key, len(b), v)
			}
			if v < acked[o.Key] {
				t.Fatalf("round %d: %s: version %d, but %d was acknowledged", round, o.Key, v, acked[o.Key])
			}
		}

	}
}

// TestLocalOpenWritesNothing: opening an existing directory writes
// nothing in it (a reader may open a directory it cannot or must not
// write); the first Put makes what it needs.
func TestLocalOpenWritesNothing(t *testing.T) {
	dir := t.TempDir()
	l, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("after NewLocal the directory holds %v (%v), want nothing", ents, err)
	}
	if objs, err := l.List(context.Background(), ""); err != nil || len(objs) != 0 {
		t.Fatalf("list of an empty directory: %+v, %v", objs, err)
	}
	if err := l.Put(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "k")); err != nil || string(b) != "v" {
		t.Fatalf("k on disk: %q, %v", b, err)
	}
}
