package irl

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is a syntax or resolution error at a position in an IRL file. Its
// text is "file:line:col: reason".
type Error struct {
	Pos Pos
	Msg string
}

func newError(p Pos, format string, args ...any) *Error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// ErrorList is the set of errors Load found, sorted by file and position.
// errors.As finds each *Error through Unwrap.
type ErrorList []*Error

// maxListed is the number of errors ErrorList.Error spells out.
const maxListed = 10

// Error lists the first errors, one per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i == maxListed {
			b.WriteString("\n(and " + strconv.Itoa(len(l)-maxListed) + " more errors)")
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the errors for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// sorted sorts the list by file and offset and drops exact duplicates.
func (l ErrorList) sorted() ErrorList {
	slices.SortStableFunc(l, func(a, b *Error) int {
		if c := cmp.Compare(a.Pos.File, b.Pos.File); c != 0 {
			return c
		}
		return cmp.Compare(a.Pos.Offset, b.Pos.Offset)
	})
	return slices.CompactFunc(l, func(a, b *Error) bool { return *a == *b })
}
