package probe

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// FuzzEncode drives the encoder with a script of events (string fields
// from the fuzzer, through the process-wide string table as the probes put
// them there) and decodes every connection's bytes with the bridge's
// decoder, whole, byte by byte and at random splits. It checks: nothing
// panics; the decoder accepts every connection; the three feedings give
// the same records and the same error; the records are the events (round
// trip).
//
// Script bytes: op = b%8, arguments from the next bytes:
//
//	0 TraceMetadata (session: string a or b)   3 AfterOperationFailed (cause a or b)
//	1 BeforeOperationEvent (operation a or b)  4 new connection (registry reset)
//	2 AfterOperationEvent                      5 switch the operation's class
//	6 SplitEvent                               7 JoinEvent (joined trace: the one before)
//	8 InvocationRecord (parent node: string a or b)
func FuzzEncode(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 0}, "void a.B.c()", "a.B")
	f.Add([]byte{0, 1, 1, 1, 3, 0, 4, 1, 0, 2, 0, 5, 1, 1}, "op with ünïcödé", "cause\x00with\xffbad bytes")
	f.Add([]byte{4, 4, 0, 0, 0, 0}, "", "")
	f.Add([]byte{0, 0, 1, 0, 6, 0, 7, 1, 4, 0, 7, 0, 2, 0}, "void a.B.c()", "a.B")
	f.Add([]byte{0, 0, 8, 0, 1, 0, 6, 0, 8, 1, 4, 0, 8, 1, 2, 0}, "node-a", "nöde-b")
	// Names from real Kieker logs.
	seedFromMaps(f, testcorpus.Path(f, "kieker-logs"))
	f.Fuzz(func(t *testing.T, script []byte, a, b string) {
		strs := [2]uint32{names.intern(a), names.intern(b)}
		ops := [2][2]Op{{NewOp(a, b), NewOp(b, a)}, {NewOp(a, a), NewOp(b, b)}}
		host := names.intern("fuzz-host")
		var r registry
		r.reset()
		type conn struct {
			bytes []byte
			want  []rec
		}
		conns := []conn{{}}
		cls := 0
		var ts int64
		for i := 0; i < len(script); i++ {
			arg := 0
			if i+1 < len(script) {
				arg = int(script[i+1] & 1)
			}
			ts++
			c := &conns[len(conns)-1]
			ev := event{ts: ts, trace: int64(i), order: int32(i)}
			var ext event
			switch script[i] % 9 {
			case 0:
				ev.kind, ev.str, ev.order = kindMeta, strs[arg], -1
				ext = event{kind: kindMetaExt, ts: int64(arg), trace: int64(i) - 1}
				c.want = append(c.want, rec{"TraceMetadata", ts, []any{int64(i), int64(arg), names.strs[strs[arg]], "fuzz-host", int64(i) - 1, int64(-1)}})
			case 1, 2, 3:
				op := ops[cls][arg]
				ev.op = op.id
				n := names.op(op.id)
				vals := []any{ts, int64(i), int64(i), n.op, n.cls}
				switch script[i] % 9 {
				case 1:
					ev.kind = kindBefore
					c.want = append(c.want, rec{"BeforeOperationEvent", ts, vals})
				case 2:
					ev.kind = kindAfter
					c.want = append(c.want, rec{"AfterOperationEvent", ts, vals})
				case 3:
					ev.kind, ev.str = kindFailed, strs[1-arg]
					c.want = append(c.want, rec{"AfterOperationFailedEvent", ts, append(vals, names.strs[strs[1-arg]])})
				}
			case 6:
				ev.kind = kindSplit
				c.want = append(c.want, rec{"SplitEvent", ts, []any{ts, int64(i), int64(i)}})
			case 7:
				ev.kind = kindJoin
				ext = event{kind: kindJoinExt, trace: int64(i) - 1}
				c.want = append(c.want, rec{"JoinEvent", ts, []any{ts, int64(i), int64(i), int64(i) - 1}})
			case 8:
				ev.kind, ev.str = kindInv, strs[arg]
				inv := int64(i)<<32 | int64(arg)
				ext = invExt(inv, int64(i)*3, int64(i)-1, int32(arg))
				c.want = append(c.want, rec{"InvocationRecord", ts, []any{inv, int64(pid), "fuzz-host", int64(i) * 3, ts,
					int64(i) - 1, int64(arg), names.strs[strs[arg]], int64(i), int64(i)}})
			case 4:
				r.reset()
				conns = append(conns, conn{})
				continue
			case 5:
				cls = 1 - cls
				continue
			}
			c.bytes = r.appendEvent(c.bytes, &ev, &ext, host)
		}
		rnd := rand.New(rand.NewPCG(uint64(len(script)), uint64(len(a))))
		for i, c := range conns {
			whole, errWhole := decodeSplit(c.bytes, func(int) int { return len(c.bytes) })
			single, errSingle := decodeSplit(c.bytes, func(int) int { return 1 })
			random, errRandom := decodeSplit(c.bytes, func(left int) int { return 1 + rnd.IntN(left) })
			if errWhole != nil {
				t.Fatalf("connection %d: the bridge's decoder rejects the probe's bytes: %v", i, errWhole)
			}
			if !sameErr(errWhole, errSingle) || !sameErr(errWhole, errRandom) {
				t.Fatalf("connection %d: errors differ: whole %v, byte by byte %v, random %v", i, errWhole, errSingle, errRandom)
			}
			if diff := cmp.Diff(c.want, whole, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("connection %d (-events +decoded):\n%s", i, diff)
			}
			if diff := cmp.Diff(whole, single); diff != "" {
				t.Fatalf("connection %d, byte by byte (-whole +single):\n%s", i, diff)
			}
			if diff := cmp.Diff(whole, random); diff != "" {
				t.Fatalf("connection %d, random splits (-whole +random):\n%s", i, diff)
			}
		}
	})
}

// errUndecoded: bytes are left at the end that make no whole record.
var errUndecoded = errors.New("bytes left undecoded")

// decodeSplit decodes b fed in pieces whose sizes next chooses (given the
// bytes left).
func decodeSplit(b []byte, next func(left int) int) ([]rec, error) {
	dec := kieker.NewDecoder(kieker.Options{Inline: true, Catalog: trace.Types()})
	var batch record.Batch
	var pend []byte
	for len(b) > 0 {
		n := min(max(next(len(b)), 1), len(b))
		pend = append(pend, b[:n]...)
		b = b[n:]
		used, err := dec.Decode(pend, &batch)
		if err != nil {
			return simplify(batch.Records), err
		}
		pend = pend[:copy(pend, pend[used:])]
	}
	if len(pend) > 0 {
		return simplify(batch.Records), errUndecoded
	}
	return simplify(batch.Records), nil
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// seedFromMaps adds seeds made of strings from the kieker.map files of
// real Kieker logs (operation and class signatures as Kieker writes them).
func seedFromMaps(f *testing.F, dir string) {
	var maps []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "kieker.map" {
			maps = append(maps, p)
		}
		return nil
	})
	for _, m := range maps {
		fh, err := os.Open(m)
		if err != nil {
			continue
		}
		s := kieker.NewStrings(0)
		err = kieker.ReadMap(fh, s, 0)
		fh.Close()
		if err != nil {
			continue
		}
		var op, other string
		for id := int32(0); id < 1000 && (op == "" || other == ""); id++ {
			v, ok := s.Get(id)
			switch {
			case !ok:
			case op == "" && strings.Contains(v, "("):
				op = v
			case other == "" && !strings.HasPrefix(v, "kieker."):
				other = v
			}
		}
		f.Add([]byte{0, 0, 1, 0, 1, 1, 3, 1, 2, 0, 4, 0, 1, 1, 2, 1}, op, other)
	}
}
