package stream

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// ErrUnknownType is wrapped by ResolveTypes' errors.
var ErrUnknownType = errors.New("unknown record type")

// ResolveTypes maps type names (full, or short when unambiguous) to the
// full names of md's types. A type the repository has no records of yet
// may still be asked for — its records may come: a full name (with a
// package) as it is, a short name when it names one of Kieker's or
// tracebridge's own types. Any other name, or a short name of several
// types, is an error that lists what the repository has.
func ResolveTypes(md *Metadata, names []string) ([]string, error) {
	var out []string
	var errs []error
	for _, n := range names {
		var match []string
		for _, t := range md.Types {
			if t.Name == n || shortName(t.Name) == n {
				match = append(match, t.Name)
			}
		}
		switch {
		case len(match) == 1:
			out = append(out, match[0])
		case len(match) > 1 && contains(match, n):
			out = append(out, n)
		case len(match) > 1:
			sort.Strings(match)
			errs = append(errs, fmt.Errorf("record type %q is ambiguous: %s", n, strings.Join(match, ", ")))
		case strings.Contains(n, "."):
			out = append(out, n) // a type still to come
		case builtinShort(n) != "":
			out = append(out, builtinShort(n))
		default:
			var known []string
			for _, t := range md.Types {
				known = append(known, shortName(t.Name))
			}
			sort.Strings(known)
			list := "none yet"
			if len(known) > 0 {
				list = strings.Join(known, ", ")
			}
			errs = append(errs, fmt.Errorf("%w %q: the repository has no records of it (its types: %s)", ErrUnknownType, n, list))
		}
	}
	return out, errors.Join(errs...)
}

// builtinShort returns the full name of the built-in type (Kieker's, the
// span and invocation records) whose short name is n, or "" when there is
// none or several.
func builtinShort(n string) string {
	full := ""
	for _, t := range trace.Types().Types() {
		if shortName(t.Name) == n {
			if full != "" {
				return ""
			}
			full = t.Name
		}
	}
	return full
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ParseTime reads a point in time as the commands take it: a duration
// before now ("10m", "2h30m", "7d"), RFC 3339 ("2026-01-02T15:04:05Z",
// with fractions or a zone offset), or "now".
func ParseTime(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := pipeline.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("time %q: a duration before now must not be negative", s)
		}
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("time %q: want a duration before now (10m, 2h, 7d), RFC 3339 (2026-01-02T15:04:05Z) or now", s)
}
