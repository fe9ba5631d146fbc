package objstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
)

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
	if err := os.WriteFile(debris, []byte("half an obj"), 0o644); err != nil {
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
		t.Fatalf("NewLocal left the temporary file: %v", err)
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
