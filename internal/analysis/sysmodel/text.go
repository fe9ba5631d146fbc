package sysmodel

import (
	"strconv"
	"time"
)

// Kieker's LoggingTimestampConversionUtils.convertLoggingTimestampToUTCString:
// the millisecond of a nanosecond timestamp in SimpleDateFormat's
// "EEE, d MMM yyyy HH:mm:ss.SSS Z", then " (UTC)".
const kiekerDate = "Mon, 2 Jan 2006 15:04:05.000 -0700"

func appendDate(dst []byte, ns int64) []byte {
	ms := ns / 1e6 // Java's long division truncates towards zero
	dst = time.UnixMilli(ms).UTC().AppendFormat(dst, kiekerDate)
	return append(dst, " (UTC)"...)
}

// AppendExecution appends e as Kieker's Execution.toString prints it:
// "traceId[eoi,ess] tin-tout host::@N:package.Class.operation session",
// and " (assumed)" after an assumed execution.
func AppendExecution(dst []byte, id string, e *Execution) []byte {
	dst = append(dst, id...)
	dst = append(dst, '[')
	dst = strconv.AppendInt(dst, int64(e.EOI), 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, int64(e.ESS), 10)
	dst = append(dst, "] "...)
	dst = strconv.AppendInt(dst, e.Tin, 10)
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, e.Tout, 10)
	dst = append(dst, ' ')
	dst = append(dst, e.Alloc.Container.Name...)
	dst = append(dst, "::"...)
	dst = append(dst, e.Alloc.Assembly.Name()...)
	dst = append(dst, ':')
	dst = append(dst, e.Alloc.Assembly.Type.FullName()...)
	dst = append(dst, '.')
	dst = append(dst, e.Op.Sig.Name...)
	dst = append(dst, ' ')
	dst = append(dst, e.Session...)
	if e.Assumed {
		dst = append(dst, " (assumed)"...)
	}
	return dst
}

// AppendExecutionTrace appends t as Kieker's ExecutionTraceWriterFilter
// writes it (ExecutionTrace.toString and a line end):
//
//	TraceId 42 (minTin=… (Mon, 2 Jan 2006 …); maxTout=… (…); maxEss=1):
//	<42[0,0] …>
//	<42[1,1] …>
//	(an empty line)
func AppendExecutionTrace(dst []byte, t *ExecutionTrace) []byte {
	minTin, maxTout := t.MinTin(), t.MaxTout()
	dst = append(dst, "TraceId "...)
	dst = append(dst, t.ID...)
	dst = append(dst, " (minTin="...)
	dst = strconv.AppendInt(dst, minTin, 10)
	dst = append(dst, " ("...)
	dst = appendDate(dst, minTin)
	dst = append(dst, "); maxTout="...)
	dst = strconv.AppendInt(dst, maxTout, 10)
	dst = append(dst, " ("...)
	dst = appendDate(dst, maxTout)
	dst = append(dst, "); maxEss="...)
	dst = strconv.AppendInt(dst, int64(t.MaxESS()), 10)
	dst = append(dst, "):\n"...)
	for i := range t.Execs {
		dst = append(dst, '<')
		dst = AppendExecution(dst, t.ID, &t.Execs[i])
		dst = append(dst, ">\n"...)
	}
	return append(dst, '\n')
}

// Message is a message of a message trace: a synchronous call or its
// reply, between two executions (indexes into the trace's Execs) or the
// 'Entry' (-1).
type Message struct {
	Reply    bool
	Time     int64 // the callee's tin for a call, its tout for a reply
	From, To int
}

// Entry is the index that stands for Kieker's 'Entry'.
const Entry = -1

// Messages returns the messages of t in Kieker's order
// (ExecutionTrace.toMessageTrace): each call when the callee starts, the
// replies of the calls that have returned before the next call at their
// depth or above, and the rest at the end.
func (t *ExecutionTrace) Messages() []Message {
	out := make([]Message, 0, 2*len(t.Execs))
	type open struct{ callee, caller int }
	stack := make([]open, 0, 16)
	reply := func() {
		o := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, Message{Reply: true, Time: t.Execs[o.callee].Tout, From: o.callee, To: o.caller})
	}
	for i := range t.Execs {
		for len(stack) > t.Execs[i].ESS {
			reply()
		}
		caller := Entry
		if len(stack) > 0 {
			caller = stack[len(stack)-1].callee
		}
		out = append(out, Message{Time: t.Execs[i].Tin, From: caller, To: i})
		stack = append(stack, open{callee: i, caller: caller})
	}
	for len(stack) > 0 {
		reply()
	}
	return out
}

// AppendMessageTrace appends t as Kieker's MessageTraceWriterFilter writes
// it (MessageTrace.toString and a line end):
//
//	Trace 42:
//	<SYNC-CALL tin 'Entry' --> 42[0,0] …>
//	<SYNC-RPLY tout 42[0,0] … --> 'Entry'>
//	(an empty line)
func AppendMessageTrace(dst []byte, t *ExecutionTrace) []byte {
	dst = append(dst, "Trace "...)
	dst = append(dst, t.ID...)
	dst = append(dst, ":\n"...)
	end := func(dst []byte, i int) []byte {
		if i == Entry {
			return append(dst, "'Entry'"...)
		}
		return AppendExecution(dst, t.ID, &t.Execs[i])
	}
	for _, m := range t.Messages() {
		if m.Reply {
			dst = append(dst, "<SYNC-RPLY "...)
		} else {
			dst = append(dst, "<SYNC-CALL "...)
		}
		dst = strconv.AppendInt(dst, m.Time, 10)
		dst = append(dst, ' ')
		dst = end(dst, m.From)
		dst = append(dst, " --> "...)
		dst = end(dst, m.To)
		dst = append(dst, ">\n"...)
	}
	return append(dst, '\n')
}
