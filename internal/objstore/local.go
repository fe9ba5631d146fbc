package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// tmpDir is the directory under a Local's root where Put writes before it
// renames; it is never listed and no key may start with it.
const tmpDir = ".objstore-tmp"

// StaleTemp is the age past which NewLocal removes a temporary file: a
// crashed Put's, not one another process is writing.
const StaleTemp = time.Hour

// Local keeps objects as files under a directory: key "a/b/c" is the file
// DIR/a/b/c. Put writes a temporary file, syncs it, renames it into place
// and syncs the directory, so a crash leaves the old object or the new one.
//
// One difference from S3: a directory cannot hold both a key and keys
// under it as a folder ("a" and "a/b"); the second Put fails.
type Local struct {
	dir  string // absolute, cleaned
	name string // "local DIR"
}

var _ Store = (*Local)(nil)

// NewLocal opens (creating it if needed) a directory store and removes the
// temporary files a crash left behind (older than StaleTemp). Any number
// of processes may open the same directory. Opening an existing
// directory writes nothing in it: the first Put makes the directory of
// temporary files (a reader may open a directory it cannot write).
func NewLocal(dir string) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local %s: %w", dir, err)
	}
	l := &Local{dir: abs, name: "local " + abs}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	ents, err := os.ReadDir(filepath.Join(abs, tmpDir))
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	for _, e := range ents {
		// A recent one may be another process's Put in flight (serve
		// writing while a reader opens the store): leave it.
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > StaleTemp {
			os.Remove(filepath.Join(abs, tmpDir, e.Name()))
		}
	}
	return l, nil
}

// Close implements Store; a Local holds nothing open.
func (l *Local) Close() error { return nil }

// Dir returns the store's directory.
func (l *Local) Dir() string { return l.dir }

func (l *Local) String() string { return l.name }

func (l *Local) fail(op, key string, err error) error {
	return &Error{Backend: l.name, Op: op, Key: key, Err: err}
}

// path validates key and returns its file.
func (l *Local) path(op, key string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", l.fail(op, key, err)
	}
	if key == tmpDir || strings.HasPrefix(key, tmpDir+"/") {
		return "", l.fail(op, key, &reason{msg: "key starts with the reserved " + tmpDir, kind: ErrKey})
	}
	return filepath.Join(l.dir, filepath.FromSlash(key)), nil
}

// notFound turns a missing file (or a directory where an object was
// asked for, or a file where a directory was expected) into ErrNotExist.
func notFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := l.path("get", key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, l.fail("get", key, err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		if notFound(err) {
			return nil, l.fail("get", key, &reason{msg: "not found", kind: ErrNotExist})
		}
		return nil, l.fail("get", key, err)
	}
	return b, nil
}

// GetRange implements Store.
func (l *Local) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p, err := l.path("get range", key)
	if err != nil {
		return nil, err
	}
	if err := checkRange(off, n); err != nil {
		return nil, l.fail("get range", key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, l.fail("get range", key, err)
	}
	if n == 0 {
		return []byte{}, nil
	}
	f, err := os.Open(p)
	if err != nil {
		if notFound(err) {
			return nil, l.fail("get range", key, &reason{msg: "not found", kind: ErrNotExist})
		}
		return nil, l.fail("get range", key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, l.fail("get range", key, err)
	}
	if !st.Mode().IsRegular() {
		return nil, l.fail("get range", key, &reason{msg: "not found", kind: ErrNotExist})
	}
	if off+n > st.Size() {
		return nil, l.fail("get range", key, rangeErr(off, n, st.Size()))
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) { // truncated since the Stat: a new, shorter object
			return nil, l.fail("get range", key, rangeErr(off, n, -1))
		}
		return nil, l.fail("get range", key, err)
	}
	return b, nil
}

func rangeErr(off, n, size int64) error {
	msg := fmt.Sprintf("range of %d bytes at offset %d past the end of the object", n, off)
	if size >= 0 {
		msg = fmt.Sprintf("range of %d bytes at offset %d past the end of the object (%d bytes)", n, off, size)
	}
	return &reason{msg: msg, kind: ErrRange}
}

// Put implements Store.
func (l *Local) Put(ctx context.Context, key string, data ...[]byte) error {
	p, err := l.path("put", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return l.fail("put", key, err)
	}
	tmp, err := l.writeTemp(data)
	if err != nil {
		return l.fail("put", key, err)
	}
	dir := filepath.Dir(p)
	// A concurrent Delete may remove the (empty) parent between mkdirs and
	// the rename: make it again.
	for attempt := 0; ; attempt++ {
		if err = l.mkdirs(dir); err == nil {
			err = os.Rename(tmp, p)
		}
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt == 3 {
			break
		}
	}
	if err != nil {
		os.Remove(tmp)
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
			return l.fail("put", key, &reason{msg: "the key conflicts with a stored key (a directory cannot hold both K and K/…)", cause: err})
		}
		return l.fail("put", key, err)
	}
	if err := syncDir(dir); err != nil {
		return l.fail("put", key, err)
	}
	return nil
}

// writeTemp writes data to a synced temporary file and returns its path.
func (l *Local) writeTemp(data [][]byte) (string, error) {
	f, err := os.CreateTemp(filepath.Join(l.dir, tmpDir), "put-*")
	if errors.Is(err, fs.ErrNotExist) { // removed under us: make it again
		if err = os.MkdirAll(filepath.Join(l.dir, tmpDir), 0o755); err == nil {
			f, err = os.CreateTemp(filepath.Join(l.dir, tmpDir), "put-*")
		}
	}
	if err != nil {
		return "", err
	}
	for _, part := range data {
		if _, err = f.Write(part); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// mkdirs makes dir and its missing parents under the root and syncs the
// parent of each directory it made, so the new names survive a crash.
func (l *Local) mkdirs(dir string) error {
	var made []string
	for d := dir; d != l.dir && len(d) > len(l.dir); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		made = append(made, d)
	}
	if len(made) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range made {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Delete implements Store; it also removes the directories the deletion
// left empty (below the root).
func (l *Local) Delete(ctx context.Context, key string) error {
	p, err := l.path("delete", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return l.fail("delete", key, err)
	}
	st, err := os.Lstat(p)
	if err != nil {
		if notFound(err) {
			return nil
		}
		return l.fail("delete", key, err)
	}
	if st.IsDir() { // keys under it as a folder; no object of this key
		return nil
	}
	if err := os.Remove(p); err != nil {
		if notFound(err) {
			return nil
		}
		return l.fail("delete", key, err)
	}
	dir := filepath.Dir(p)
	if err := syncDir(dir); err != nil && !notFound(err) {
		return l.fail("delete", key, err)
	}
	for d := dir; d != l.dir && len(d) > len(l.dir); d = filepath.Dir(d) {
		if os.Remove(d) != nil { // not empty (or already gone): stop
			break
		}
	}
	return nil
}

// List implements Store.
func (l *Local) List(ctx context.Context, prefix string) ([]Object, error) {
	if !utf8.ValidString(prefix) || strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "\x00") {
		return nil, l.fail("list", prefix, &reason{msg: "bad prefix", kind: ErrKey})
	}
	// Walk from the deepest directory the prefix names whole.
	start := l.dir
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if err := validPath(prefix[:i]); err != nil {
			// No valid key has this prefix.
			return nil, nil
		}
		start = filepath.Join(l.dir, filepath.FromSlash(prefix[:i]))
	}
	var objs []Object
	err := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if notFound(err) { // deleted while we walked
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if path == filepath.Join(l.dir, tmpDir) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(l.dir, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) || validPath(key) != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if notFound(err) {
				return nil
			}
			return err
		}
		objs = append(objs, Object{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil && !notFound(err) {
		return nil, l.fail("list", prefix, err)
	}
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return objs, nil
}
