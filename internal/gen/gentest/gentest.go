// Package gentest proves generated record code in tests: it compiles the
// code and the round-trip test program that gen.Generate writes with
// Options.Tests, runs the program, and decodes the two streams it writes
// (kdb.bin, kieker.bin) with internal/codec/kdb and internal/codec/kieker,
// comparing every value with gen.Samples.
//
// A language whose toolchain (gcc, go, python3, perl) is missing is
// skipped, unless TRACEBRIDGE_REQUIRE_SERVICES=1 is set (as in CI): then
// the test fails.
//
// Concurrency: Run may be called from parallel tests on different
// directories.
package gentest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/gen"
	"github.com/tracebridge/tracebridge/internal/mapping"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Timeout bounds each compiler or program run.
const Timeout = 5 * time.Minute

// Run compiles and runs the generated code for lang in dir (written there
// by gen.Generate with Options.Tests and package pkg, "" for the default),
// then decodes the program's output and compares it with
// gen.Samples(types). cat must know every type (the KDB mapping file is
// resolved through it).
func Run(t testing.TB, lang gen.Lang, pkg, dir string, cat *record.Catalog, types []*record.Type) {
	t.Helper()
	if pkg == "" {
		pkg = lang.DefaultPackage()
	}
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	program, mapping := gen.TestFiles(lang, pkg)
	switch lang {
	case gen.C:
		runC(t, pkg, dir, program, out)
	case gen.Go:
		runGo(t, dir, out)
	case gen.Python:
		runPython(t, pkg, dir, program, out)
	case gen.Perl:
		runPerl(t, pkg, dir, program, out)
	default:
		t.Fatalf("gentest: unknown language %v", lang)
	}
	Check(t, filepath.Join(dir, mapping), out, cat, types)
}

// Tool returns the path of a tool, skipping the test when it is missing
// (failing it when TRACEBRIDGE_REQUIRE_SERVICES=1).
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("TRACEBRIDGE_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%s is required (TRACEBRIDGE_REQUIRE_SERVICES=1) but not installed: %v", name, err)
	}
	t.Skipf("%s not installed: %v", name, err)
	return ""
}

// run runs a command in dir and returns its stdout, failing the test with
// the output when it fails. With quiet, anything on stderr fails too
// (warnings of python -W error and perl -w are errors).
func run(t testing.TB, dir string, env []string, quiet bool, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if err != nil || quiet && stderr.Len() > 0 {
		t.Fatalf("%s %s (in %s): %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), dir, err, tail(stdout.String()), tail(stderr.String()))
	}
	t.Logf("%s %s (%v): %s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond), strings.TrimSpace(tail(stdout.String())))
	return stdout.String()
}

// tail keeps the end of long output.
func tail(s string) string {
	const max = 8000
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}

var (
	sanitizeOnce sync.Once
	sanitizeOK   bool
)

// sanitizers reports whether gcc can build and run a program with
// AddressSanitizer and UndefinedBehaviorSanitizer here.
func sanitizers(gcc string) bool {
	sanitizeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gentest-asan-")
		if err != nil {
			return
		}
		defer os.RemoveAll(dir)
		src := filepath.Join(dir, "a.c")
		if os.WriteFile(src, []byte("#include <stdlib.h>\nint main(void) { char *p = malloc(4); p[0] = 0; free(p); return 0; }\n"), 0o644) != nil {
			return
		}
		bin := filepath.Join(dir, "a")
		if exec.Command(gcc, "-fsanitize=address,undefined", "-o", bin, src).Run() != nil {
			return
		}
		sanitizeOK = exec.Command(bin).Run() == nil
	})
	return sanitizeOK
}

// CFlags are the flags the generated C code must compile with.
var CFlags = []string{"-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"}

func runC(t testing.TB, pkg, dir, program, out string) {
	gcc := Tool(t, "gcc")
	// The code alone, optimized: some warnings only appear with -O2.
	run(t, dir, nil, true, gcc, append(append([]string(nil), CFlags...), "-O2", "-c", "-o", os.DevNull, pkg+".c")...)
	args := append([]string(nil), CFlags...)
	if sanitizers(gcc) {
		args = append(args, "-O0", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all")
	}
	bin := filepath.Join(dir, "roundtrip")
	run(t, dir, nil, true, gcc, append(args, "-o", bin, pkg+".c", program)...)
	run(t, dir, nil, true, bin, out)
}

func runGo(t testing.TB, dir, out string) {
	goTool := Tool(t, "go")
	mod := filepath.Join(dir, "go.mod")
	if _, err := os.Stat(mod); os.IsNotExist(err) {
		if err := os.WriteFile(mod, []byte("module example.com/generated\n\ngo 1.21\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOWORK=off", "GO111MODULE=on", "CGO_ENABLED=0"}
	run(t, dir, env, true, goTool, "vet", ".")
	if sc, err := exec.LookPath("staticcheck"); err == nil { // optional: CI installs it
		run(t, dir, env, true, sc, ".")
	}
	run(t, dir, env, false, goTool, "test", "-count=1", "-run", "^TestRoundTrip", "-v", ".", "-args", "-out", out)
}

func runPython(t testing.TB, pkg, dir, program, out string) {
	py := Tool(t, "python3")
	run(t, dir, nil, true, py, "-W", "error", "-m", "py_compile", pkg+".py", program)
	run(t, dir, nil, true, py, "-W", "error", program, out)
}

func runPerl(t testing.TB, pkg, dir, program, out string) {
	perl := Tool(t, "perl")
	module := strings.ReplaceAll(pkg, "::", "/") + ".pm"
	for _, f := range []string{module, program} {
		perlCompile(t, perl, dir, f)
	}
	run(t, dir, nil, true, perl, "-w", program, out)
}

// perlCompile runs perl -c -w on a file and fails when it prints anything
// but "syntax OK" (a warning included).
func perlCompile(t testing.TB, perl, dir, file string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, perl, "-I", dir, "-c", "-w", file)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(b)) != file+" syntax OK" {
		t.Fatalf("perl -c -w %s: %v\n%s", file, err, tail(string(b)))
	}
}

// Check decodes kdb.bin and kieker.bin in out (KDB ids from the mapping
// file) and compares them with gen.Samples(types).
func Check(t testing.TB, mappingFile, out string, cat *record.Catalog, types []*record.Type) {
	t.Helper()
	want := gen.Samples(types)
	m, err := mapping.Load(mappingFile, cat)
	if err != nil {
		t.Fatalf("mapping: %v", err)
	}
	kdbBytes := read(t, filepath.Join(out, "kdb.bin"))
	var b record.Batch
	d := kdb.NewDecoder(m, kdb.Options{})
	n, err := d.Decode(kdbBytes, &b)
	if err == nil {
		err = d.End()
	}
	if err != nil || n != len(kdbBytes) {
		t.Fatalf("kdb.bin: decoded %d of %d bytes: %v", n, len(kdbBytes), err)
	}
	wantKDB := make([]string, len(want))
	for i := range want {
		r := want[i]
		r.LoggingTimestamp = record.NoTimestamp // KDB carries none
		wantKDB[i] = Format(&r)
	}
	if diff := cmp.Diff(wantKDB, formatAll(b.Records)); diff != "" {
		t.Errorf("kdb.bin records differ from the samples (-want +got):\n%s", diff)
	}

	kiekerBytes := read(t, filepath.Join(out, "kieker.bin"))
	var kb record.Batch
	kd := kieker.NewDecoder(kieker.Options{Catalog: cat, Inline: true})
	n, err = kd.Decode(kiekerBytes, &kb)
	if err != nil || n != len(kiekerBytes) || kd.Pending() {
		t.Fatalf("kieker.bin: decoded %d of %d bytes: %v", n, len(kiekerBytes), err)
	}
	wantKieker := make([]string, len(want))
	for i := range want {
		wantKieker[i] = Format(&want[i])
	}
	if diff := cmp.Diff(wantKieker, formatAll(kb.Records)); diff != "" {
		t.Errorf("kieker.bin records differ from the samples (-want +got):\n%s", diff)
	}
}

func read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func formatAll(rs []record.Record) []string {
	out := make([]string, len(rs))
	for i := range rs {
		out[i] = Format(&rs[i])
	}
	return out
}

// Format renders a record exactly (floats as their bits) for diffs.
func Format(r *record.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s ts=%d", r.Type.Name, r.LoggingTimestamp)
	for i, f := range r.Type.Fields {
		fmt.Fprintf(&b, " %s=", f.Name)
		if i >= len(r.Values) {
			b.WriteString("<missing>")
			continue
		}
		v := r.Values[i]
		if !f.Array {
			b.WriteString(formatValue(f.Kind, v))
			continue
		}
		b.WriteByte('[')
		if l := v.List(); l != nil {
			for j, it := range l.Items {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(formatValue(f.Kind, it))
			}
		}
		b.WriteByte(']')
	}
	return b.String()
}

func formatValue(k record.Kind, v record.Value) string {
	switch k {
	case record.Float:
		return fmt.Sprintf("%v(%08x)", v.Float(), math.Float32bits(v.Float()))
	case record.Double:
		return fmt.Sprintf("%v(%016x)", v.Double(), v.Bits())
	case record.String:
		return strconv.Quote(v.Str())
	case record.Char:
		return fmt.Sprintf("u+%04x", uint16(v.Int()))
	}
	return v.Format(k)
}
