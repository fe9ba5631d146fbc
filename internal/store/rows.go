package store

import "github.com/tracebridge/tracebridge/internal/store/block"

// rowList holds rows: a head's in segments of 1<<rowSegShift (a busy
// host's head has hundreds of thousands, and one slice grown by doubling
// was copied, pointers and all, at each step: an eighth of a busy
// store's allocations), a block's as one segment (blockRows). A view
// (snapshot) reads the rows below its length while the head appends
// after them: a full segment never moves, and the first one, while it
// grows, moves to new memory and leaves the old to the snapshots.
type rowList struct {
	segs  [][]block.Summary
	n     int
	shift uint8 // row i is segs[i>>shift][i&(1<<shift-1)]
}

const rowSegShift = 12 // 4,096 rows, about 400 KiB

// blockRows wraps a block's rows.
func blockRows(rows []block.Summary) rowList {
	if len(rows) == 0 {
		return rowList{}
	}
	return rowList{segs: [][]block.Summary{rows}, n: len(rows), shift: 62}
}

func (l *rowList) len() int { return l.n }

// at returns row i (i < len()).
func (l *rowList) at(i int) *block.Summary {
	return &l.segs[uint(i)>>l.shift][uint(i)&(1<<l.shift-1)]
}

// append adds a row (a head's list).
func (l *rowList) append(r block.Summary) {
	if l.n == 0 {
		l.shift = rowSegShift
	}
	s := l.n >> l.shift
	if s == len(l.segs) {
		// A head's first segment grows as its rows come (many heads
		// hold a few traces); the others are made whole.
		l.segs = append(l.segs, make([]block.Summary, 0, min(1<<l.shift, max(16, l.n))))
	}
	l.segs[s] = append(l.segs[s], r)
	l.n++
}

// snapshot returns the rows so far, for a reader while l grows (it
// copies the list of segments, not the rows).
func (l *rowList) snapshot() rowList {
	return rowList{segs: append([][]block.Summary(nil), l.segs...), n: l.n, shift: l.shift}
}

// contains reports whether a row satisfies f.
func (l *rowList) contains(f func(*block.Summary) bool) bool {
	for i := range l.n {
		if f(l.at(i)) {
			return true
		}
	}
	return false
}
