package split

import (
	"fmt"
	"github.com/tracebridge/tracebridge/internal/trace"
	"hash/fnv"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// The fuzz input is a little program: two header bytes pick the boundary
// spec, the limits and how the input is cut into batches; then every three
// bytes (op, a, b) add one record.
var fuzzClasses = []string{"a.b.c.D", "a.b.c.E", "a.b.x.F", "a.y.G", "z.H", "I", "a.b.c.d.J", ""}

var fuzzSpecs = []string{"package:1", "package:2", "package:3", `regex:a\.b\..* z\..*`, `regex:.*E .*F .*\.G`, "regex:.*"}

const fuzzTraces = 4

// maxFuzzRecords bounds the records of one fuzz input, so that the fuzzer
// spends its time on many small programs (and minimises quickly).
const maxFuzzRecords = 300

// program decodes a fuzz input into records, a spec, options and batch
// sizes.
func program(data []byte) (recs []record.Record, spec string, o Options, sizes []int) {
	if len(data) < 2 {
		return nil, fuzzSpecs[0], Options{}, nil
	}
	spec = fuzzSpecs[int(data[0])%len(fuzzSpecs)]
	if data[0]&0x80 != 0 {
		o = Options{MaxOpenTraces: 1 + int(data[1]&3), MaxDepth: 1 + int(data[1]>>2&3), MaxFrames: 1 + int(data[1]>>4&7), MaxBuffered: 1 + int(data[1]>>4)}
	}
	sizes = []int{1 + int(data[1]%7), 1 + int(data[1]/7%5)}
	var next [fuzzTraces]int32
	var stack [fuzzTraces][]string
	ts := int64(0)
	for p := data[2:]; len(p) >= 3 && len(recs) < maxFuzzRecords; p = p[3:] {
		opc, a, b := p[0], p[1], p[2]
		k := int(a) % fuzzTraces
		id := int64(k + 1)
		oi := next[k]
		if a&0x80 != 0 { // a wrong orderIndex now and then
			oi = int32(b % 8)
		}
		class := fuzzClasses[int(b)%len(fuzzClasses)]
		switch opc % 11 {
		case 0:
			parent, porder := id, int32(-1)
			if a&0x40 != 0 {
				parent, porder = -1, 0
			}
			if a&0x20 != 0 {
				recs = append(recs, rec(tATM, 1, iv(id), iv(int64(k)), sv("s"), sv("h"), iv(parent), iv(int64(porder)), sv("app")))
			} else {
				recs = append(recs, tm(id, int64(k), parent, porder))
			}
			next[k], stack[k] = 0, nil
			continue
		case 1, 2, 3:
			recs = append(recs, before(id, oi, class, "m"))
			stack[k] = append(stack[k], class)
		case 4, 5:
			if n := len(stack[k]); n > 0 && a&0x10 == 0 {
				class = stack[k][n-1]
				stack[k] = stack[k][:n-1]
			}
			recs = append(recs, after(id, oi, class, "m"))
		case 6:
			recs = append(recs, failed(id, oi, class, "m"))
		case 7:
			recs = append(recs, call(id, oi, class, fuzzClasses[int(a)%len(fuzzClasses)]))
		case 8:
			recs = append(recs, splitEv(id, oi))
		case 9:
			oid := id
			if a&0x40 != 0 {
				oid = -1
			}
			recs = append(recs, oer(oid, class, int32(b%8), int32(b>>3%4)))
			continue
		case 10:
			ts++
			recs = append(recs, cpu(ts))
			continue
		}
		next[k] = oi + 1
	}
	return recs, spec, o, sizes
}

// ops encodes a real log as a fuzz program (traces and classes folded onto
// the program's few), for seeds.
func ops(header [2]byte, recs []record.Record) []byte {
	out := header[:]
	var tc trace.TypeCache
	traces := map[int64]byte{}
	slot := func(id int64) byte {
		if s, ok := traces[id]; ok {
			return s
		}
		s := byte(len(traces) % fuzzTraces)
		traces[id] = s
		return s
	}
	classByte := func(r *record.Record, ti *trace.TypeInfo) byte {
		h := fnv.New32a()
		h.Write([]byte(str(r, ti.Class)))
		return byte(h.Sum32() % uint32(len(fuzzClasses)-1))
	}
	for i := range recs {
		r := &recs[i]
		ti := tc.Get(r.Type)
		switch ti.Role {
		case trace.RoleMeta:
			out = append(out, 0, slot(r.Values[ti.TraceID].Int()), 0)
		case trace.RoleBefore:
			out = append(out, 1, slot(r.Values[ti.TraceID].Int()), classByte(r, ti))
		case trace.RoleAfter:
			out = append(out, 4, slot(r.Values[ti.TraceID].Int()), 0)
		case trace.RoleEvent:
			out = append(out, 7, slot(r.Values[ti.TraceID].Int()), classByte(r, ti))
		case trace.RoleOER:
			out = append(out, 9, 0x40, 0)
		default:
			out = append(out, 10, 0, 0)
		}
	}
	return out
}

// FuzzSplitMerge: arbitrary event sequences never panic; splitting gives
// the same records and reports however the input is cut into batches; and
// merging the split output gives back the input exactly, malformed traces
// included (they are reported and passed through unsplit).
func FuzzSplitMerge(f *testing.F) {
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 3, 0, 0, 0, 1, 0, 0, 1, 0, 2, 4, 0, 0, 4, 0, 0})                // a → a.b.x: cut
	f.Add([]byte{0x80, 0xff, 0, 1, 0, 1, 1, 1, 1, 1, 4, 4, 0, 1, 4, 1, 0, 4, 1, 0}) // tiny limits
	f.Add([]byte{1, 9, 9, 1, 19, 9, 1, 10, 9, 1, 0, 10, 0, 0})                      // OERs
	f.Add([]byte{2, 1, 0, 0, 0, 1, 0x80, 5, 4, 0, 0})                               // a gap
	for i, path := range corpusLogs(f) {
		recs := readLog(f, path)
		f.Add(ops([2]byte{byte(i), byte(3 * i)}, recs[:min(len(recs), maxFuzzRecords)]))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, spec, o, sizes := program(data)
		b := mustParse(t, spec)
		whole := splitRecs(t, b, in, nil, o)
		for _, cut := range [][]int{{1}, sizes} {
			part := splitRecs(t, b, in, cut, o)
			if d := diffRecords(whole.out, part.out); d != "" {
				t.Fatalf("split in batches of %v differs from whole (-whole +batches):\n%s", cut, d)
			}
			if fmt.Sprint(whole.malformed) != fmt.Sprint(part.malformed) {
				t.Fatalf("reports differ: whole %v, batches of %v %v", whole.malformed, cut, part.malformed)
			}
		}
		mg := mergeRecs(t, whole.out, sizes, o)
		if d := diffRecords(in, mg.out); d != "" {
			t.Fatalf("merge(split(x)) != x with %s %+v (-want +got):\n%s\nsplit:\n%s", spec, o, d, format(whole.out))
		}
		if whole.stats.RecordsIn != int64(len(in)) || whole.stats.RecordsOut != int64(len(whole.out)) {
			t.Fatalf("stats %+v for %d in, %d out", whole.stats, len(in), len(whole.out))
		}
	})
}
