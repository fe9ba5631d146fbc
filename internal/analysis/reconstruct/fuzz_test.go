package reconstruct

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
)

// FuzzReconstruct feeds records made from the input's bytes (TraceMetadata,
// Before, After, failed After, Call, constructor and OER records of a few
// trace ids, operations and orderIndexes) with and without the repair:
// nothing panics, every valid trace passes Kieker's checks, and nothing
// is left once Finish returns. Each input is fed whole and split in two
// batches, which must give the same traces.
func FuzzReconstruct(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 2, 0})
	f.Add([]byte{0, 1, 1, 0, 4, 1, 1, 2, 2, 2, 2, 3})
	f.Add([]byte{0, 1, 1, 0, 1, 1, 2, 2, 7, 7, 6, 0, 6, 1})
	f.Add([]byte{5, 0, 5, 1, 5, 2, 0, 3, 1, 3, 3, 4})
	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, in []byte) {
	ops := []string{mainOp, extOp, libOp, innOp}
	classes := []string{"a.A", "b.B", "c.C", "d.D"}
	{
		if len(in) > 400 {
			return
		}
		var b batch
		order := map[int]int{}
		for i := 0; i+1 < len(in); i += 2 {
			kind, arg := in[i]%8, int(in[i+1])
			id := arg%3 + 1
			op, class := ops[arg/3%4], classes[arg/3%4]
			o := order[id]
			if arg&0x80 != 0 {
				o = arg % 5 // an orderIndex out of turn
			} else {
				order[id]++
			}
			ts := i + 1
			switch kind {
			case 0:
				b.meta(id)
			case 1:
				b.before(ts, id, o, op, class)
			case 2:
				b.after(ts, id, o, op, class)
			case 3:
				b.add("operation.AfterOperationFailedEvent", ts, id, o, op, class, "java.lang.Error")
			case 4:
				b.call(ts, id, o, op, class, ops[(arg+1)%4], classes[(arg+1)%4])
			case 5:
				b.add("OperationExecutionRecord", op, "s", id, ts, ts+arg%7, "H", arg%4, arg/4%3)
			case 6:
				b.add("constructor.BeforeConstructorEvent", ts, id, o, op, class)
			case 7:
				b.add("constructor.AfterConstructorEvent", ts, id, o, op, class)
			}
		}
		for _, repair := range []bool{false, true} {
			var whole, split []string
			for _, parts := range [][2]int{{len(b.Records), len(b.Records)}, {len(b.Records) / 2, len(b.Records)}} {
				got := &whole
				if parts[0] != parts[1] {
					got = &split
				}
				r := New(sysmodel.NewRepository(), Options{Repair: repair, MaxTraceDuration: 3,
					Valid: func(tr *sysmodel.ExecutionTrace) {
						if reason := check(tr.Execs); reason != "" {
							t.Fatalf("valid trace %s fails the checks: %s", tr.ID, reason)
						}
						*got = append(*got, string(sysmodel.AppendExecutionTrace(nil, tr)))
					},
					Invalid: func(v *Invalid) { *got = append(*got, v.String()) },
				})
				first := b.Batch
				first.Records = b.Records[:parts[0]]
				r.Add(&first)
				rest := b.Batch
				rest.Records = b.Records[parts[0]:]
				r.Add(&rest)
				r.Finish()
				if s := r.Stats(); s.Open != 0 || s.Buffered != 0 {
					t.Fatalf("after Finish: %+v", s)
				}
			}
			if len(whole) != len(split) {
				t.Fatalf("whole %d traces, split %d", len(whole), len(split))
			}
			for i := range whole {
				if whole[i] != split[i] {
					t.Fatalf("whole:\n%s\nsplit:\n%s", whole[i], split[i])
				}
			}
		}
	}
}
