package cluster

import (
	"math"
	"time"
)

// cuts finds an owner's safe point: the last message of its partition
// that a checkpoint may remove from the stream, so that a next owner,
// reading from the message after it, assembles every trace as this one
// did. It counts in stream sequences, never in clock readings (a clock
// stepped back or forward moves no cut).
//
// A cut after message b is exact when no trace reaches across it: no
// trace still open began at or before b, and no trace — open or already
// emitted — has records both at or before b and after it. The second
// part is what links need: a Kieker thread's later events, a child
// thread's TraceMetadata naming its parent, an invocation identifier
// naming the invocation that created its task, each joins a trace begun
// in an earlier message; a reader starting between the two would make a
// part of that trace alone (a task's trace without its parent: a
// cross-thread trace split). The assembler says for each message how far
// back the traces it touched began (trace.Assembler.Reach).
//
// Busy Kieker sources may keep overlapping traces in flight at every
// message, so that no exact cut exists for long. Then, after holdFor
// without one, the cut falls back to the loose rule (only traces still
// open count): the stream then holds at most about holdFor more than
// the loose rule keeps, and such a cut is counted (loose) and logged, as
// a takeover there may part a trace emitted already.
type cuts struct {
	// marks are the messages taken since the last cut, in order.
	marks []mark
	// holdFor is how long an exact cut may trail the loose one.
	holdFor time.Duration
	// trailing is when the exact cut began to trail (zero: it does not).
	trailing time.Time
	// safe is the last cut returned: its marks are gone, so a checkpoint
	// that failed to purge up to it (a stream without quorum for a
	// moment) must get it again, not the purged base (the stream would
	// keep those messages until more came, and none may come).
	safe uint64
}

// mark is a message taken: its stream sequence and the least sequence at
// which a trace its records touched began (math.MaxUint64: none).
type mark struct {
	seq, reach uint64
}

// defaultHoldFor is cuts.holdFor of an owner.
const defaultHoldFor = time.Minute

// add notes message seq, whose records touched traces begun at reach or
// later.
func (c *cuts) add(seq, reach uint64) {
	c.marks = append(c.marks, mark{seq: seq, reach: reach})
}

// cut returns the safe point: base (the last sequence removed, or before
// the first message taken) when none is further, and whether it is a
// loose cut (see cuts). last is the last sequence taken; oldest the
// least sequence at which a trace still open began (open false: none);
// now a monotonic clock reading. The marks up to the cut are dropped.
func (c *cuts) cut(base, last, oldest uint64, open bool, now time.Time) (uint64, bool) {
	limit := last
	if open {
		limit = min(limit, oldest-1) // (oldest ≥ 1: a message's sequence)
	}
	// The loose cut: the last message taken before limit. The exact cut:
	// the last message b ≤ limit that no later message reaches back to or
	// before.
	loose, exact := -1, -1
	reach := uint64(math.MaxUint64) // least reach of the marks after i
	for i := len(c.marks) - 1; i >= 0; i-- {
		m := c.marks[i]
		if m.seq <= limit {
			if loose < 0 {
				loose = i
			}
			if reach > m.seq {
				exact = i
				break
			}
		}
		reach = min(reach, m.reach)
	}
	i, isLoose := exact, false
	switch {
	case loose < 0 || exact == loose:
		c.trailing = time.Time{}
	case c.trailing.IsZero():
		c.trailing = now
	case now.Sub(c.trailing) >= c.holdFor:
		i, isLoose = loose, true
		c.trailing = now // another chance for an exact cut from here
	}
	if i < 0 {
		// Nothing taken is safe yet: where the marks begin. (No later
		// mark reaches before the first, whose predecessor is purged or
		// was never read by this owner.)
		s := max(base, c.safe)
		if len(c.marks) > 0 && c.marks[0].seq > 0 && c.marks[0].seq-1 <= limit && reach > c.marks[0].seq-1 {
			s = max(s, c.marks[0].seq-1)
		}
		return s, false
	}
	s := c.marks[i].seq
	c.marks = append(c.marks[:0], c.marks[i+1:]...)
	c.safe = max(c.safe, s)
	return s, isLoose
}
