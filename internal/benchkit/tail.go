package benchkit

import (
	"bytes"
	"strings"
	"sync"
)

// Tail is an io.Writer that keeps the last bytes written to it, for the
// standard error of a child process. It is safe for concurrent use.
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTail returns a Tail that keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

// Write keeps p, dropping the oldest bytes beyond the limit.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Contains reports whether what is kept contains s.
func (t *Tail) Contains(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Contains(t.buf, []byte(s))
}

// String returns what is kept after "stderr:\n", or a note that nothing
// was written.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return "(no output on stderr)"
	}
	return "stderr:\n" + s
}
