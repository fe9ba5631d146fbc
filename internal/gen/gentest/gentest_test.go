package gentest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/gen"
	"github.com/tracebridge/tracebridge/internal/record"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// check runs Check with a recorder and returns the failures.
func check(t *testing.T, mapping, out string, cat *record.Catalog, types []*record.Type) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(r, mapping, out, cat, types)
	}()
	<-done
	return r.failed
}

// TestCheckCatchesDifferences writes the streams a correct program writes
// (with internal/codec) and checks that Check accepts them and rejects
// them with one value changed or cut short.
func TestCheckCatchesDifferences(t *testing.T) {
	cat := record.Builtin()
	types := []*record.Type{cat.Lookup(record.TraceMetadata), cat.Lookup(record.CPUUtilizationRecord)}
	dir := t.TempDir()
	mapping := filepath.Join(dir, "m.map")
	var m strings.Builder
	for i, typ := range types {
		fmt.Fprintf(&m, "%d=%s\n", i+1, typ.Name)
	}
	if err := os.WriteFile(mapping, []byte(m.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var kdbBytes, kiekerBytes []byte
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	for i, r := range gen.Samples(types) {
		var err error
		if kdbBytes, err = kdb.AppendBinary(kdbBytes, int32(i/gen.SamplesPerType+1), &r); err != nil {
			t.Fatal(err)
		}
		if kiekerBytes, err = enc.Append(kiekerBytes, &r); err != nil {
			t.Fatal(err)
		}
	}
	write := func(kdbData, kiekerData []byte) string {
		out := t.TempDir()
		if err := os.WriteFile(filepath.Join(out, "kdb.bin"), kdbData, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "kieker.bin"), kiekerData, 0o644); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if f := check(t, mapping, write(kdbBytes, kiekerBytes), cat, types); len(f) > 0 {
		t.Fatalf("correct streams rejected: %q", f)
	}
	flip := func(b []byte) []byte {
		c := append([]byte(nil), b...)
		c[len(c)-1] ^= 1 // the last value of the last record
		return c
	}
	for name, out := range map[string]string{
		"kdb value":        write(flip(kdbBytes), kiekerBytes),
		"kieker value":     write(kdbBytes, flip(kiekerBytes)),
		"kdb truncated":    write(kdbBytes[:len(kdbBytes)-1], kiekerBytes),
		"kieker truncated": write(kdbBytes, kiekerBytes[:len(kiekerBytes)-1]),
		"kdb missing":      write(nil, kiekerBytes),
	} {
		if f := check(t, mapping, out, cat, types); len(f) == 0 {
			t.Errorf("%s: not detected", name)
		}
	}
}
