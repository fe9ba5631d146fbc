package logdir

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// slowWriter collects what is written and fails from the failAt-th write
// on (0: never).
type slowWriter struct {
	bytes.Buffer
	writes atomic.Int32
	failAt int32
}

var errDisk = errors.New("disk full")

func (w *slowWriter) Write(p []byte) (int, error) {
	if n := w.writes.Add(1); w.failAt > 0 && n >= w.failAt {
		return 0, errDisk
	}
	return w.Buffer.Write(p)
}

func TestOverlapWriterKeepsOrderAcrossBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var dst slowWriter
	o := newOverlapWriter(&dst, 0)
	pool := make([]byte, 3*minOverlapBuffer)
	for i := range pool {
		pool[i] = byte(rng.Uint32())
	}
	var want bytes.Buffer
	for i := range 60 {
		// Some writes are tiny, some span two buffers.
		off, n := rng.IntN(minOverlapBuffer), rng.IntN(3*minOverlapBuffer/2)
		if i%3 == 0 {
			n %= 100
		}
		p := pool[off : off+n]
		want.Write(p)
		if n, err := o.Write(p); n != len(p) || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		if o.Total() != int64(want.Len()) {
			t.Fatalf("Total %d after %d bytes", o.Total(), want.Len())
		}
		if i%17 == 0 {
			if err := o.Flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst.Bytes(), want.Bytes()) {
				t.Fatalf("after Flush the destination holds %d bytes, want %d (or they differ)", dst.Len(), want.Len())
			}
		}
	}
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.Bytes(), want.Bytes()) {
		t.Fatalf("destination holds %d bytes, want %d (or they differ)", dst.Len(), want.Len())
	}
}

func TestOverlapWriterReportsBackgroundErrors(t *testing.T) {
	dst := &slowWriter{failAt: 2}
	o := newOverlapWriter(dst, 0)
	p := make([]byte, minOverlapBuffer)
	var err error
	for i := 0; i < 4 && err == nil; i++ {
		_, err = o.Write(p) // the second buffer's write fails in the background
	}
	if !errors.Is(err, errDisk) {
		t.Fatalf("Write after a failed background write: %v, want %v", err, errDisk)
	}
	if err := o.Flush(); !errors.Is(err, errDisk) {
		t.Fatalf("Flush: %v, want the kept error", err)
	}
	var fresh slowWriter
	o.Reset(&fresh)
	if _, err := o.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	if err := o.Flush(); err != nil || fresh.String() != "ok" {
		t.Fatalf("after Reset: %q, %v", fresh.String(), err)
	}
}

type closeCount struct{ n atomic.Int32 }

func (c *closeCount) Close() error { c.n.Add(1); return nil }

// TestOverlapWriterFinishInBackground: Finish writes what is buffered and
// closes the file on its own goroutine; the next file's bytes go to the
// new destination, and a failure of the finished file comes back from the
// next wait, naming its path.
func TestOverlapWriterFinishInBackground(t *testing.T) {
	for _, fail := range []bool{false, true} {
		old, next := &slowWriter{}, &slowWriter{}
		if fail {
			old.failAt = 1
		}
		var c closeCount
		o := newOverlapWriter(old, 0)
		o.Write([]byte("old file"))
		if err := o.Finish(&c, "old.bin"); err != nil {
			t.Fatal(err)
		}
		o.Retarget(next)
		o.Write([]byte("new file"))
		err := o.Flush()
		if c.n.Load() != 1 {
			t.Fatalf("fail %v: closed %d times", fail, c.n.Load())
		}
		if fail {
			if !errors.Is(err, errDisk) || !bytes.Contains([]byte(err.Error()), []byte("old.bin")) {
				t.Fatalf("flush after a failed finish: %v", err)
			}
			continue
		}
		if err != nil || old.String() != "old file" || next.String() != "new file" {
			t.Fatalf("flush: %v; old %q, new %q", err, old.String(), next.String())
		}
	}
}
