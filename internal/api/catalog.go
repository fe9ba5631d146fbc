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
	// Complete is false when a bound left names out.
	Complete bool `json:"complete"`
}

func names(c *call, st *store.Store) error {
	host := c.str("host")
	if err := c.check(); err != nil {
		return err
	}
	out := Names{Services: st.Services()}
	out.Names, out.Complete = st.TraceNames(host)
	return c.json(out)
}
