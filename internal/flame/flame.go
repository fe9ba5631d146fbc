// Package flame aggregates stack samples into folded stacks (Brendan
// Gregg's format: one line per distinct stack, frames from the root to the
// leaf joined by ';', a space, the count) and renders them as an SVG flame
// graph. It knows nothing of where stacks come from: an Aggregator takes
// them from records (JFR's jdk.ExecutionSample by default: the stackTrace
// field, top frame first, as internal/codec/jfr renders it), per group
// (thread, host) and time window.
//
// Limits: a Stacks holds at most MaxStacks distinct stacks; samples of
// further stacks are counted under the single stack "[other stacks]".
//
// Concurrency: a Stacks or an Aggregator is used by one goroutine at a time
// (Aggregator.Consume runs on the pipeline's goroutine); the SVG and folded
// writers only read.
package flame

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// DefaultMaxStacks is the number of distinct stacks a Stacks keeps when
// MaxStacks is zero.
const DefaultMaxStacks = 200_000

// Other is the stack that counts samples beyond MaxStacks.
const Other = "[other stacks]"

// Stacks counts samples per stack.
type Stacks struct {
	// MaxStacks bounds the distinct stacks kept (DefaultMaxStacks when
	// zero).
	MaxStacks int

	index  map[string]int // folded stack → position in counts
	stacks []string
	counts []int64
	total  int64
	buf    []byte
}

// Add counts n samples of a stack given root first.
func (s *Stacks) Add(rootFirst []string, n int64) {
	s.buf = s.buf[:0]
	for i, f := range rootFirst {
		if i > 0 {
			s.buf = append(s.buf, ';')
		}
		s.buf = appendFrame(s.buf, f)
	}
	s.add(s.buf, n)
}

// AddLeafFirst counts n samples of a stack given leaf (top frame) first,
// as JFR records stacks; frame transforms each frame first (nil: as is).
func (s *Stacks) AddLeafFirst(leafFirst []string, frame func(string) string, n int64) {
	s.buf = s.buf[:0]
	for i := len(leafFirst) - 1; i >= 0; i-- {
		f := leafFirst[i]
		if frame != nil {
			f = frame(f)
		}
		if i < len(leafFirst)-1 {
			s.buf = append(s.buf, ';')
		}
		s.buf = appendFrame(s.buf, f)
	}
	s.add(s.buf, n)
}

// appendFrame appends a frame with the characters the format uses as
// separators (';' and line ends) replaced.
func appendFrame(dst []byte, f string) []byte {
	if f == "" {
		return append(dst, "[unknown]"...)
	}
	for i := 0; i < len(f); i++ {
		switch c := f[i]; c {
		case ';':
			dst = append(dst, ':')
		case '\n', '\r':
			dst = append(dst, ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func (s *Stacks) add(folded []byte, n int64) {
	if n <= 0 {
		return
	}
	s.total += n
	if i, ok := s.index[string(folded)]; ok { // no allocation for a known stack
		s.counts[i] += n
		return
	}
	max := s.MaxStacks
	if max <= 0 {
		max = DefaultMaxStacks
	}
	key := Other
	if len(s.stacks) < max {
		key = string(folded)
	} else if i, ok := s.index[Other]; ok {
		s.counts[i] += n
		return
	}
	if s.index == nil {
		s.index = map[string]int{}
	}
	s.index[key] = len(s.stacks)
	s.stacks = append(s.stacks, key)
	s.counts = append(s.counts, n)
}

// AddFolded counts n samples of a folded stack ("a;b;c").
func (s *Stacks) AddFolded(folded string, n int64) { s.add([]byte(folded), n) }

// Merge adds the counts of o.
func (s *Stacks) Merge(o *Stacks) {
	for i, k := range o.stacks {
		s.add([]byte(k), o.counts[i])
	}
}

// Total returns the number of samples.
func (s *Stacks) Total() int64 { return s.total }

// Len returns the number of distinct stacks.
func (s *Stacks) Len() int { return len(s.stacks) }

// Count returns the samples of a folded stack.
func (s *Stacks) Count(folded string) int64 {
	if i, ok := s.index[folded]; ok {
		return s.counts[i]
	}
	return 0
}

// sorted returns the folded stacks in byte order.
func (s *Stacks) sorted() []string {
	keys := append([]string(nil), s.stacks...)
	sort.Strings(keys)
	return keys
}

// WriteFolded writes one line per stack, "frame;frame;frame count", in
// byte order of the stacks (so equal inputs give equal files).
func (s *Stacks) WriteFolded(w io.Writer) error {
	bw := bufio.NewWriter(w)
	var line []byte
	for _, k := range s.sorted() {
		line = append(line[:0], k...)
		line = append(line, ' ')
		line = strconv.AppendInt(line, s.Count(k), 10)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadFolded reads folded stacks ("a;b;c 12" per line; empty lines and
// lines starting with # are skipped). A stack that appears twice is
// counted twice.
func ReadFolded(r io.Reader) (*Stacks, error) {
	s := &Stacks{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			return nil, fmt.Errorf("folded stacks: line %d: no count", n)
		}
		c, err := strconv.ParseInt(line[i+1:], 10, 64)
		if err != nil || c < 0 {
			return nil, fmt.Errorf("folded stacks: line %d: count %q", n, line[i+1:])
		}
		s.AddFolded(line[:i], c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("folded stacks: %w", err)
	}
	return s, nil
}
