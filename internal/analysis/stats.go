package analysis

import (
	"cmp"
	"slices"
)

// OperationStats are the executions of one operation of one (assembly)
// component across the analysed traces. Times are in ns; Self is the time
// not spent in the operation's calls of the same trace.
type OperationStats struct {
	Component string
	Operation string
	Sig       Signature
	Stats
	Self   int64
	Errors int64
}

func (a *Analyzer) addOps(m *MessageTrace) {
	children := make([]int64, len(m.Execs)) // time spent in calls, per execution
	for i := range m.Execs {
		if c := m.Execs[i].Caller; c >= 0 {
			children[c] += m.Execs[i].Duration()
		}
	}
	for i := range m.Execs {
		e := &m.Execs[i]
		k := key(AssemblyOperationGraph, e)
		s := a.ops[k]
		if s == nil {
			s = &OperationStats{Component: e.Assembly, Operation: e.Operation, Sig: e.Sig}
			a.ops[k] = s
		}
		s.add(e.Duration())
		// Calls that overlap their caller (async spans) leave no self time.
		s.Self += max(0, e.Duration()-children[i])
		if e.Error {
			s.Errors++
		}
	}
}

// Operations returns the statistics per operation, the most total time
// first.
func (a *Analyzer) Operations() []OperationStats {
	out := make([]OperationStats, 0, len(a.ops))
	for _, s := range a.ops {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y OperationStats) int {
		return cmp.Or(cmp.Compare(y.Total, x.Total), cmp.Compare(x.Component, y.Component), cmp.Compare(x.Operation, y.Operation))
	})
	return out
}
