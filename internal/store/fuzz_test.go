package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// seedBlock is a block holding two traces, and the symbols they use.
func seedBlock() ([]byte, *symbols) {
	syms := newSymbols()
	e := encoder{syms: syms}
	var bodies [][]byte
	for i, t := range []*trace.Trace{mkTrace(1, "h", 3, 100, 50, true), mkTrace(2, "h", 1, 200, 5, false)} {
		_ = i
		bodies = append(bodies, bytes.Clone(e.encodeTrace(t)))
	}
	raw := appendPayload(nil, 1, e.newSyms, bodies)
	return appendBlock(nil, raw, blockHeader{count: 2, minStart: 100, maxEnd: 205}), syms
}

// FuzzSegmentReader: no bytes make the block reader, the payload parser
// or the trace decoder panic or allocate without bound; what decodes
// encodes back the same.
func FuzzSegmentReader(f *testing.F) {
	blk, _ := seedBlock()
	f.Add(blk)
	f.Add(blk[:len(blk)/2])
	f.Add([]byte("TBK1"))
	f.Add([]byte("TBK2"))
	f.Add([]byte("TBK3"))
	for _, name := range []string{"body-v2.block", "body-v3.block"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b) // a zstd chunk (TBK2)
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, raw, err := readBlock(bytes.NewReader(b), 0)
		if err != nil {
			return
		}
		pl, err := parsePayload(raw, h.version)
		if err != nil {
			return
		}
		syms := newSymbols()
		for _, s := range pl.syms {
			syms.id(s)
		}
		for _, body := range pl.traces {
			tr, err := decodeTrace(body, syms)
			if err != nil {
				continue
			}
			e := encoder{syms: syms}
			again := e.encodeTrace(tr)
			tr2, err := decodeTrace(again, syms)
			if err != nil || len(tr2.Spans) != len(tr.Spans) {
				t.Fatalf("re-encoded trace does not decode: %v", err)
			}
		}
	})
}

// FuzzTraceDecoder goes straight at a trace body.
func FuzzTraceDecoder(f *testing.F) {
	syms := newSymbols()
	e := encoder{syms: syms}
	f.Add(bytes.Clone(e.encodeTrace(mkTrace(1, "h", 4, 1, 2, true))))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeTrace(b, syms)
		checkBodyTerms(t, "fuzzed body", b, syms)
	})
}
