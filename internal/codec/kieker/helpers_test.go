package kieker

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// corpus reads a file of the shared corpus.
var corpus = testcorpus.Read

// logDir returns the single directory holding kieker.map under a corpus log.
func logDir(t testing.TB, name string) string {
	t.Helper()
	var dir string
	root := testcorpus.Path(t, "kieker-logs", name)
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "kieker.map" {
			dir = filepath.Dir(p)
		}
		return err
	})
	if err != nil || dir == "" {
		t.Fatalf("no kieker.map under %s: %v", root, err)
	}
	return dir
}

// dataFile returns the one file with the extension ext in dir.
func dataFile(t testing.TB, dir, ext string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
	if len(m) != 1 {
		t.Fatalf("%d %s files in %s", len(m), ext, dir)
	}
	return m[0]
}

// loadMap reads dir/kieker.map.
func loadMap(t testing.TB, dir string) *Strings {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "kieker.map"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := NewStrings(0)
	if err := ReadMap(f, s, 0); err != nil {
		t.Fatal(err)
	}
	return s
}

// recString renders a record for diffs, floats by their bits.
func recString(r *record.Record) string {
	var sb strings.Builder
	sb.WriteString(r.Type.ShortName())
	fmt.Fprintf(&sb, "@%d{", r.LoggingTimestamp)
	for i, f := range r.Type.Fields {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(f.Name)
		sb.WriteByte('=')
		if i >= len(r.Values) {
			sb.WriteString("<missing>")
			continue
		}
		v := r.Values[i]
		if f.Array {
			l := v.List()
			if l == nil {
				sb.WriteString("nil")
				continue
			}
			sb.WriteByte('[')
			for j, it := range l.Items {
				if j > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(valString(f.Kind, it))
			}
			sb.WriteByte(']')
			continue
		}
		sb.WriteString(valString(f.Kind, v))
	}
	sb.WriteByte('}')
	return sb.String()
}

func valString(k record.Kind, v record.Value) string {
	switch k {
	case record.Float, record.Double:
		return fmt.Sprintf("%s/%x", v.Format(k), v.Bits())
	case record.String:
		return fmt.Sprintf("%q", v.Str())
	}
	return v.Format(k)
}

func recStrings(rs []record.Record) []string { return recordtest.Strings(rs, recString) }

// countTypes counts records by short type name.
func countTypes(rs []record.Record) map[string]int { return recordtest.CountTypes(rs) }

// result is what feeding a stream to a decoder produced.
type result struct {
	recs    []record.Record
	err     error
	off     int64
	pending bool
}

func (r result) errString() string {
	if r.err == nil {
		return "<nil>"
	}
	return r.err.Error()
}

// chunker returns the size of the next chunk.
type chunker func() int

func whole() int { return math.MaxInt32 }

func oneByte() int { return 1 }

func randomChunks(seed uint64, max int) chunker {
	rng := rand.New(rand.NewPCG(seed, 7))
	return func() int { return 1 + rng.IntN(max) }
}

// feedBinary feeds data to d in chunks the way a network source does:
// append the chunk to what is left, decode, keep the rest. It stops at the
// first error.
func feedBinary(d *Decoder, data []byte, next chunker) result {
	var b record.Batch
	var res result
	var buf []byte
	for i := 0; ; {
		if i < len(data) {
			n := min(next(), len(data)-i)
			buf = append(buf, data[i:i+n]...)
			i += n
		}
		n, err := d.Decode(buf, &b)
		for j := range b.Records {
			res.recs = append(res.recs, b.Records[j].Clone())
		}
		b.Reset()
		if n > 0 {
			buf = append(buf[:0], buf[n:]...)
		}
		if err != nil {
			res.err = err
			break
		}
		if i >= len(data) {
			break
		}
	}
	res.off = d.Offset()
	res.pending = d.Pending()
	return res
}

// feedText is feedBinary for a TextDecoder, calling Finish at the end.
func feedText(d *TextDecoder, data []byte, next chunker) result {
	var b record.Batch
	var res result
	var buf []byte
	flush := func() {
		for j := range b.Records {
			res.recs = append(res.recs, b.Records[j].Clone())
		}
		b.Reset()
	}
	for i := 0; ; {
		if i < len(data) {
			n := min(next(), len(data)-i)
			buf = append(buf, data[i:i+n]...)
			i += n
		}
		n, err := d.Decode(buf, &b)
		flush()
		if n > 0 {
			buf = append(buf[:0], buf[n:]...)
		}
		if err != nil {
			res.err = err
			break
		}
		if i >= len(data) {
			res.err = d.Finish(buf, &b)
			flush()
			break
		}
	}
	res.off = d.Offset()
	return res
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
