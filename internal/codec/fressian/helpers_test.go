package fressian

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/codectest"
)

// hx parses hex with spaces and quoted ASCII: `EF "abc" 02`.
func hx(tb testing.TB, s string) []byte { return codectest.Hex(tb, s) }

// decodeAll reads every top-level value of b.
func decodeAll(b []byte, opts Options) ([]Value, error) {
	d := NewDecoder(opts)
	d.Reset(b)
	var vs []Value
	for d.More() {
		v := d.ReadValue()
		if d.Err() != nil {
			break
		}
		vs = append(vs, v)
	}
	return vs, d.Err()
}
