package benchkit

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Flags is a benchmark program's flag set and the problems found in the
// flags it parsed, all reported at once (Err).
type Flags struct {
	*flag.FlagSet
	stderr io.Writer
	bad    []string
}

// NewFlags returns the flag set of the program name: errors and the usage
// (the line usage, then the flags' defaults) go to stderr.
func NewFlags(name, usage string, stderr io.Writer) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	return &Flags{FlagSet: fs, stderr: stderr}
}

// Parse parses args; arguments after the flags are a problem.
func (f *Flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		f.Bad("unexpected arguments %q", f.Args())
	}
	return nil
}

// Bad records a problem with the flags.
func (f *Flags) Bad(format string, args ...any) {
	f.bad = append(f.bad, fmt.Sprintf(format, args...))
}

// List returns the items of value, a comma-separated list, with spaces
// trimmed and empty items left out, that known accepts; known returns ""
// for an item it accepts, else the problem. When it accepts none and no
// problem has been found so far, "-name: none given" is one.
func (f *Flags) List(name, value string, known func(item string) (problem string)) []string {
	var list []string
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p := known(s); p != "" {
			f.bad = append(f.bad, p)
			continue
		}
		list = append(list, s)
	}
	if len(list) == 0 && len(f.bad) == 0 {
		f.Bad("-%s: none given", name)
	}
	return list
}

// Err returns nil when no problem was found, else all of them as one error
// after printing it, prefixed with the program's name, and the usage.
func (f *Flags) Err() error {
	if len(f.bad) == 0 {
		return nil
	}
	err := errors.New(strings.Join(f.bad, "; "))
	fmt.Fprintln(f.stderr, f.Name()+":", err)
	f.Usage()
	return err
}
