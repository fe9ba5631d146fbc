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

// libsFlag defines -L, the IRL files and directories with more record
// types of the commands that read records.
func libsFlag(fs *flag.FlagSet) *listFlag {
	var libs listFlag
	fs.Var(&libs, "L", "IRL file or directory with more record types (repeatable, or ':'-separated)")
	return &libs
}

// skipBadFlag defines --skip-bad of the commands that read logs.
func skipBadFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("skip-bad", false, "skip malformed records instead of stopping, and report how many")
}

// strictFlag defines --strict of the commands that print or rewrite
// records.
func strictFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("strict", false, "stop at a record whose type is not in the catalogue (by default such records are skipped and counted per type)")
}

// readFlags are the flags of the commands that print or rewrite records.
type readFlags struct {
	skipBad, strict *bool
	libs            *listFlag
}

// logReadFlags defines --skip-bad, --strict and -L.
func logReadFlags(fs *flag.FlagSet) readFlags {
	return readFlags{skipBad: skipBadFlag(fs), strict: strictFlag(fs), libs: libsFlag(fs)}
}

// repeatFlag collects a repeatable flag's values as given.
type repeatFlag []string

func (r *repeatFlag) String() string { return strings.Join(*r, " ") }

func (r *repeatFlag) Set(v string) error {
	*r = append(*r, v)
	return nil
}

// options defines a command's flags, each under a short name (KDB's) and a
// long one, and prints them one line per option with its argument and its
// real default, instead of flag.PrintDefaults' line per name.
type options struct {
	fs       *flag.FlagSet
	synopsis string
	list     []option
}

// option is one option for the usage text.
type option struct {
	short, long string // without dashes; short may be ""
	arg         string // the argument's name; "" for a switch
	help        string
}

func (o *options) add(short, long, arg, help string, define func(name string)) {
	for _, n := range []string{short, long} {
		if n != "" {
			define(n)
		}
	}
	o.list = append(o.list, option{short: short, long: long, arg: arg, help: help})
}

// str defines a string option; a non-empty default is shown.
func (o *options) str(p *string, short, long, arg, def, help string) {
	if def != "" {
		help += " (default " + def + ")"
	}
	o.add(short, long, arg, help, func(n string) { o.fs.StringVar(p, n, def, help) })
}

// int defines an integer option. Its default, often a "not given" marker,
// is not shown: help says what not giving it means.
func (o *options) int(p *int, short, long, arg string, def int, help string) {
	o.add(short, long, arg, help, func(n string) { o.fs.IntVar(p, n, def, help) })
}

// bool defines a switch.
func (o *options) bool(p *bool, short, long, help string) {
	o.add(short, long, "", help, func(n string) { o.fs.BoolVar(p, n, false, help) })
}

// value defines an option with its own flag.Value.
func (o *options) value(v flag.Value, short, long, arg, help string) {
	o.add(short, long, arg, help, func(n string) { o.fs.Var(v, n, help) })
}

// usageColumn is where the help text of an option starts.
const usageColumn = 28

// usage prints the synopsis and one line per option (wrapped at 80
// columns).
func (o *options) usage(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: tracebridge %s\n\noptions:\n", o.synopsis)
	for _, opt := range o.list {
		names := "    --" + opt.long
		if opt.short != "" {
			names = "-" + opt.short + ", --" + opt.long
		}
		if opt.arg != "" {
			names += " " + opt.arg
		}
		b.WriteString(wrap("  "+names, usageColumn, opt.help))
	}
	io.WriteString(w, b.String())
}

// wrap returns head and text as lines of at most 80 columns (unless a word
// is longer): text starts at column, on the next line when head reaches
// it, and goes on at column on the lines after.
func wrap(head string, column int, text string) string {
	var b strings.Builder
	line := head
	if len(line) >= column-1 {
		b.WriteString(line + "\n")
		line = ""
	}
	line += strings.Repeat(" ", column-len(line))
	for i, word := range strings.Fields(text) {
		if i > 0 && len(line)+1+len(word) > 80 {
			b.WriteString(line + "\n")
			line = strings.Repeat(" ", column)
		} else if i > 0 {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}
