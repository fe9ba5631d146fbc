package sysmodel

// TraceJSON is an execution trace (and its messages) in JSON.
type TraceJSON struct {
	TraceID  string          `json:"traceId"`
	Session  string          `json:"sessionId"`
	MinTin   int64           `json:"minTin"`
	MaxTout  int64           `json:"maxTout"`
	MaxESS   int             `json:"maxEss"`
	Execs    []ExecutionJSON `json:"executions"`
	Messages []MessageJSON   `json:"messages,omitempty"`
}

// ExecutionJSON is an execution in JSON: its place in the trace, its
// times (ns), where it ran with Kieker's names and numbers, and the
// operation.
type ExecutionJSON struct {
	EOI        int    `json:"eoi"`
	ESS        int    `json:"ess"`
	Tin        int64  `json:"tin"`
	Tout       int64  `json:"tout"`
	Container  string `json:"container"`
	Assembly   string `json:"assembly"`   // "@N:package.Class"
	Allocation string `json:"allocation"` // "host::@N:package.Class"
	Operation  string `json:"operation"`  // the operation's name
	Signature  string `json:"signature"`  // the full signature
	Session    string `json:"sessionId"`
	Error      bool   `json:"error,omitempty"`
	Assumed    bool   `json:"assumed,omitempty"` // Kieker's " (assumed)"
}

// MessageJSON is a message: kind "call" or "reply", its time (ns), and the
// eoi of the sending and receiving executions (-1: 'Entry').
type MessageJSON struct {
	Kind string `json:"kind"`
	Time int64  `json:"time"`
	From int    `json:"from"`
	To   int    `json:"to"`
}

// JSON returns t in JSON form, with its messages when messages is set.
func (t *ExecutionTrace) JSON(messages bool) TraceJSON {
	j := TraceJSON{TraceID: t.ID, Session: t.Session, MinTin: t.MinTin(), MaxTout: t.MaxTout(), MaxESS: t.MaxESS(),
		Execs: make([]ExecutionJSON, len(t.Execs))}
	for i := range t.Execs {
		e := &t.Execs[i]
		j.Execs[i] = ExecutionJSON{EOI: e.EOI, ESS: e.ESS, Tin: e.Tin, Tout: e.Tout, Container: e.Alloc.Container.Name,
			Assembly: e.Alloc.Assembly.String(), Allocation: e.Alloc.String(), Operation: e.Op.Sig.Name,
			Signature: e.Op.Sig.String(), Session: e.Session, Error: e.Error, Assumed: e.Assumed}
	}
	if messages {
		for _, m := range t.Messages() {
			k := "call"
			if m.Reply {
				k = "reply"
			}
			j.Messages = append(j.Messages, MessageJSON{Kind: k, Time: m.Time, From: m.From, To: m.To})
		}
	}
	return j
}

// TracesJSON returns the traces in JSON form.
func TracesJSON(ts []*ExecutionTrace, messages bool) []TraceJSON {
	out := make([]TraceJSON, len(ts))
	for i, t := range ts {
		out[i] = t.JSON(messages)
	}
	return out
}
