package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// usageError is a command-line mistake: printed with the usage, exit code 4
// (KDB's code for command-line errors).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// newFlags returns a flag set that reports errors instead of exiting and
// prints its help in the one style of every command (helpText): its
// options are read from the flag set itself.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(fs.Output(), helpText(synopsis, flagOptions(fs))) }
	return fs
}

// helpRequest is flag.ErrHelp with the help the command was asked for;
// run prints it on standard output and exits 0.
type helpRequest struct{ text string }

func (h helpRequest) Error() string { return flag.ErrHelp.Error() }
func (h helpRequest) Unwrap() error { return flag.ErrHelp }

// parseArgs parses flags that may appear before, between or after the
// positional arguments (`cat LOGDIR --json`), and returns the positionals.
// A lone "--" ends flag parsing.
//
// -h (or --help) returns a helpRequest with the command's help; a
// mistake prints the help on the flag set's output and returns a
// usageError.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	out := fs.Output()
	defer fs.SetOutput(out)
	for {
		var help strings.Builder
		fs.SetOutput(&help)
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpRequest{help.String()}
			}
			// The flag package wrote the error, then the help: the error
			// is reported once, by report, after the help.
			_, text, _ := strings.Cut(help.String(), "\n")
			io.WriteString(out, text)
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
	fs.Var(&libs, "L", "an IRL file or directory (`PATH`) with more record types (repeatable, or ':'-separated)")
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
// long one, in the order given, with the names of their arguments; help
// prints them as every command's flags are printed (helpText).
type options struct {
	fs       *flag.FlagSet
	synopsis string
	list     []option
}

// option is one option for the help text.
type option struct {
	short, long string // without dashes; either may be ""
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

// help is the command's help text.
func (o *options) help() string { return helpText(o.synopsis, o.list) }

// flagOptions describes the flags of fs for the help text, in the order
// of their names: flags sharing a variable (-o and --output) are one
// option; a one-letter name is the short one. The argument's name is the
// usage's `quoted` word, else N for numbers, DURATION, or the flag's name
// in capitals; a default that is not the zero value is shown.
func flagOptions(fs *flag.FlagSet) []option {
	var list []option
	at := map[uintptr]int{} // a variable's option in list
	fs.VisitAll(func(f *flag.Flag) {
		arg, help := flag.UnquoteUsage(f)
		if !strings.Contains(f.Usage, "`") {
			switch arg {
			case "int", "uint", "float":
				arg = "N"
			case "duration":
				arg = "DURATION"
			case "string", "value":
				arg = strings.ToUpper(f.Name)
			}
		}
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "0s" {
			help += " (default " + d + ")"
		}
		i := -1
		if v := reflect.ValueOf(f.Value); v.Kind() == reflect.Pointer {
			if j, ok := at[v.Pointer()]; ok {
				i = j
			} else {
				at[v.Pointer()] = len(list)
			}
		}
		if i < 0 {
			i = len(list)
			list = append(list, option{arg: arg, help: help})
		}
		if len(f.Name) == 1 {
			list[i].short = f.Name
		} else if list[i].long == "" {
			list[i].long = f.Name
		}
	})
	return list
}

// usageColumn is where the help text of an option starts.
const usageColumn = 28

// helpText is the help of every command: the synopsis (its lines wrapped
// at 80 columns), then one option a line, short and long name aligned,
// its description wrapped at usageColumn.
func helpText(synopsis string, list []option) string {
	var b strings.Builder
	for i, line := range strings.Split("usage: tracebridge "+strings.TrimRight(synopsis, "\n"), "\n") {
		if i == 0 || strings.HasPrefix(line, "       tracebridge ") {
			b.WriteString(wrapSynopsis(line))
		} else {
			indent := len(line) - len(strings.TrimLeft(line, " "))
			if len(line) <= 80 {
				b.WriteString(line + "\n")
			} else {
				b.WriteString(wrap(line[:indent], indent, line[indent:]))
			}
		}
	}
	if len(list) > 0 {
		b.WriteString("\noptions:\n")
	}
	for _, opt := range list {
		var names string
		switch {
		case opt.short != "" && opt.long != "":
			names = "-" + opt.short + ", --" + opt.long
		case opt.short != "":
			names = "-" + opt.short
		default:
			names = "    --" + opt.long
		}
		if opt.arg != "" {
			names += " " + opt.arg
		}
		b.WriteString(wrap("  "+names, usageColumn, opt.help))
	}
	return b.String()
}

// wrapSynopsis wraps a line of a synopsis ("usage: tracebridge cat …") at
// 80 columns between its arguments (not inside brackets), going on below
// the first argument.
func wrapSynopsis(line string) string {
	var words []string
	var ends []int // where each word ends in line
	depth, start := 0, 0
	for i, r := range line + " " {
		switch r {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case ' ':
			if depth == 0 {
				if i > start {
					words = append(words, line[start:i])
					ends = append(ends, i)
				}
				start = i + 1
			}
		}
	}
	// "usage: tracebridge NAME" or "tracebridge NAME" starts the line.
	head := 3
	if len(words) > 0 && words[0] != "usage:" {
		head = 2
	}
	if len(words) <= head {
		return line + "\n"
	}
	column := ends[head-1] + 1
	return line[:column] + wrapWords("", column, words[head:])[column:]
}

// wrap returns head and text as lines of at most 80 columns (unless a word
// is longer): text starts at column, on the next line when head reaches
// it, and goes on at column on the lines after.
func wrap(head string, column int, text string) string {
	return wrapWords(head, column, strings.Fields(text))
}

// wrapWords is wrap of the words of a text.
func wrapWords(head string, column int, words []string) string {
	var b strings.Builder
	line := head
	if t := strings.TrimRight(line, " "); t != "" && len(t) >= column-1 {
		b.WriteString(line + "\n")
		line = ""
	}
	line += strings.Repeat(" ", max(column-len(line), 0))
	for i, word := range words {
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
