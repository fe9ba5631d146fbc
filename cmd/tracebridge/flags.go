package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// usageError is a command-line mistake: printed with the usage, exit code 4
// (KDB's code for command-line errors).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tracebridge %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses flags that may appear before, between or after the
// positional arguments (`cat LOGDIR --json`), and returns the positionals.
// A lone "--" ends flag parsing.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// listFlag collects a repeatable flag; each value may also hold several
// entries separated by ':' (KDB's -L takes "paths separated by :").
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ":") }

func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ":") {
		if p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}
