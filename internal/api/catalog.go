package api

import (
	"github.com/tracebridge/tracebridge/internal/store"
)

// The service and operation catalogue is the store's (store.Services,
// Operations, ServiceSource, TraceNames): kept as traces are stored, so a
// request only reads it.

// Names are the trace names (trace.Trace.Name) and services seen.
type Names struct {
	Names    []string `json:"names"`
	Services []string `json:"services"`
	// Operations are the operations of the service asked for (by name,
	// each once; left out without service).
	Operations []string `json:"operations,omitempty"`
	// Complete is false when a bound left names out.
	Complete bool `json:"complete"`
}

func names(c *call, st *store.Store) error {
	host, svc := c.str("host"), c.str("service")
	if err := c.check(); err != nil {
		return err
	}
	out := Names{Services: st.Services()}
	if svc != "" {
		out.Operations = []string{}
		for _, op := range st.Operations(svc) {
			if n := len(out.Operations); n == 0 || out.Operations[n-1] != op.Name {
				out.Operations = append(out.Operations, op.Name)
			}
		}
	}
	out.Names, out.Complete = st.TraceNames(host)
	return c.json(out)
}
