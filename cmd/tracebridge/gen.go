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
	outDir := fs.String("o", ".", "the output `DIR` (created when missing)")
	pkg := fs.String("package", "", "package name: C prefix and file name, Go package, Python module, Perl namespace (default records; Perl Records)")
	tests := fs.Bool("tests", false, "also write the round-trip test program and its KDB mapping file (ids 1..n)")
	all := fs.Bool("all", false, "generate every type of the catalogue: the built-in types and those of -L")
	var libs listFlag
	fs.Var(&libs, "L", "an IRL file or directory (`PATH`) with more record types to look names up in (repeatable, or ':'-separated)")
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

	types, err := gen.Select(pos, libs, *all)
	if err != nil {
		return withCode(exitConfig, fmt.Errorf("gen: %w", err))
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
