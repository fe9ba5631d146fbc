package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/gen"
	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

const genSynopsis = "gen --lang c|go|python|perl [-o DIR] [-L PATH…] [--package NAME] [--tests] [--all] TYPE…|FILE.irl…"

// cmdGen writes record code: for built-in types named by TYPE (fully
// qualified or unique short name) and for every record type of the IRL
// files given as arguments (-L adds IRL for name lookup only).
//
// Exit codes: 4 for command-line mistakes (an unknown --lang, a bad
// package name), 2 for unknown or ambiguous types and bad IRL (with
// file:line), 1 when the files cannot be written.
func cmdGen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gen", genSynopsis, stderr)
	langName := fs.String("lang", "", "target language: c, go, python or perl")
	outDir := fs.String("o", ".", "output directory (created when missing)")
	pkg := fs.String("package", "", "package name: C prefix and file name, Go package, Python module, Perl namespace (default records; Perl Records)")
	tests := fs.Bool("tests", false, "also write the round-trip test program and its KDB mapping file (ids 1..n)")
	all := fs.Bool("all", false, "generate every type of the catalogue: the built-in types and those of -L")
	var libs listFlag
	fs.Var(&libs, "L", "IRL file or directory with more record types to look names up in (repeatable, or ':'-separated)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *langName == "" {
		return usagef("gen: --lang is required (c, go, python or perl)")
	}
	lang, err := gen.ParseLang(*langName)
	if err != nil {
		return usagef("gen: %v", err)
	}
	if *pkg != "" {
		if err := gen.CheckPackage(lang, *pkg); err != nil {
			return usagef("gen: %v", err)
		}
	}
	if len(pos) == 0 && !*all {
		return usagef("gen: no record types or IRL files given (or --all)")
	}

	var names, files []string
	for _, p := range pos {
		if isIRLPath(p) {
			files = append(files, p)
		} else {
			names = append(names, p)
		}
	}
	var model *irl.Model
	cat := trace.Types()
	if irlPaths := append(append([]string(nil), libs...), files...); len(irlPaths) > 0 {
		model, err = irl.Load(irlPaths...)
		if err != nil {
			return withCode(exitConfig, fmt.Errorf("gen: record types: %w", err))
		}
		if _, err := model.AddTo(cat); err != nil {
			return withCode(exitConfig, fmt.Errorf("gen: record types: %w", err))
		}
	}

	var types []gen.Type
	add := func(t *record.Type) {
		gt := gen.Type{Record: t}
		if model != nil {
			if d := model.Decl(t.Name); d != nil {
				gt.Decl, gt.Model = d, model
			}
		}
		types = append(types, gt)
	}
	if *all {
		for _, t := range cat.Types() {
			add(t)
		}
	}
	for _, f := range files {
		n, err := irlTypes(model, cat, f, add)
		if err != nil {
			return withCode(exitConfig, fmt.Errorf("gen: %w", err))
		}
		if n == 0 {
			return withCode(exitConfig, fmt.Errorf("gen: %s defines no record types (only templates or abstract entities)", f))
		}
	}
	for _, n := range names {
		t, err := gen.Find(cat, n)
		if err != nil {
			return withCode(exitConfig, fmt.Errorf("gen: %w", err))
		}
		add(t)
	}

	out, err := gen.Generate(types, gen.Options{Lang: lang, Package: *pkg, Tests: *tests, Command: genCommand(args)})
	if err != nil {
		return withCode(exitConfig, fmt.Errorf("gen: %w", err))
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	for _, f := range out {
		path := filepath.Join(*outDir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
		fmt.Fprintln(stdout, path)
	}
	return nil
}

// isIRLPath reports whether a gen argument names IRL (a .irl file or a
// directory) rather than a record type.
func isIRLPath(arg string) bool {
	if strings.HasSuffix(arg, ".irl") {
		return true
	}
	fi, err := os.Stat(arg)
	return err == nil && fi.IsDir()
}

// irlTypes adds the record types declared in the IRL file (or the files
// under the directory) path, in declaration order, and returns how many.
func irlTypes(m *irl.Model, cat *record.Catalog, path string, add func(*record.Type)) (int, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range m.Decls() {
		if !d.IsRecord() {
			continue
		}
		f, err := filepath.Abs(m.File(d).Name)
		if err != nil {
			return 0, err
		}
		if f != abs && !strings.HasPrefix(f, abs+string(filepath.Separator)) {
			continue
		}
		t := cat.Lookup(d.FullName())
		if t == nil {
			return 0, fmt.Errorf("%s: record type %s is not in the catalogue", d.Pos, d.FullName())
		}
		add(t)
		n++
	}
	return n, nil
}

// genCommand renders the command line for the generated files' headers.
func genCommand(args []string) string {
	parts := []string{"tracebridge", "gen"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'\\$") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
