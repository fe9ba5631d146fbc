package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/api"
	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	tstore "github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// httpListener is the `http:` listener: the HTTP API (internal/api),
// Jaeger's query API, /metrics, the health endpoints and the web UI.
// Build binds it; Run serves it; the engine closes the API (so that it
// stops reading the trace store) before it closes the sinks.
type httpListener struct {
	ln   net.Listener
	srv  *http.Server
	api  *api.API
	tls  bool
	once sync.Once
}

// listenHTTP checks the http section, loads the tokens and binds the
// port.
func (s *Server) listenHTTP(c config.HTTP, set Settings) error {
	if err := c.TLS.Validate(); err != nil {
		return pipeline.Classify(ErrConfig, fmt.Errorf("http: %w", err))
	}
	if err := api.CheckListen(c.Listen, c.TLS.Enabled(), c.Insecure); err != nil {
		return pipeline.Classify(ErrConfig, err)
	}
	tokens, err := api.LoadTokens(c.APITokens, c.APITokensFile)
	if err != nil {
		return pipeline.Classify(ErrConfig, fmt.Errorf("http: %w", err))
	}
	tc, err := c.TLS.ServerConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return pipeline.Classify(ErrComm, fmt.Errorf("http: %w", err))
	}
	h := &httpListener{ln: ln, tls: tc != nil}
	if tc != nil {
		h.ln = tls.NewListener(ln, tc)
	}
	s.web = h
	s.HTTPAddr = ln.Addr().String()
	s.HTTPScheme = map[bool]string{true: "https", false: "http"}[h.tls]
	h.api = api.New(api.Options{
		Logger:            s.base.Logger,
		Store:             s.traceStore,
		Console:           bridge{s},
		Counters:          bridge{s},
		Metrics:           s.Metrics,
		Shared:            s.Shared,
		Tokens:            tokens,
		ReadTokenRequired: c.ReadTokenRequired,
		UI:                set.UI,
		Version:           set.Version,
	})
	h.srv = &http.Server{Handler: h.api, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: nil, MaxHeaderBytes: 64 << 10}
	return nil
}

// traceStore returns the trace store of the first store sink, if any.
func (s *Server) traceStore() *tstore.Store {
	if s.cl != nil && s.cl.reader != nil {
		// A cluster node answers from the shared bucket (cluster.go).
		return s.cl.reader
	}
	for _, e := range s.Sinks {
		if ss, ok := s.Built[e.Name].(interface{ Store() *tstore.Store }); ok {
			return ss.Store()
		}
	}
	return nil
}

// serve serves until stop.
func (h *httpListener) serve(log func(msg string, args ...any)) {
	if err := h.srv.Serve(h.ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		log("http listener failed", "err", err)
	}
}

// stop closes the API (waiting for requests reading the store) and the
// listener. It is safe to call twice.
func (h *httpListener) stop() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		h.api.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := h.srv.Shutdown(ctx); err != nil {
			h.srv.Close()
		}
		h.ln.Close()
	})
}

// bridge is the Server as the API's console sees it, and its engine's
// counts.
type bridge struct{ s *Server }

var (
	_ api.Console  = bridge{}
	_ api.Counters = bridge{}
)

func (b bridge) Receivers() []api.Component {
	var out []api.Component
	for _, r := range b.s.ReceiverStatuses() {
		out = append(out, api.Component{Name: r.Name, Type: r.Type, Where: r.Where, State: string(r.State), Since: r.Since, Error: r.Err})
	}
	return out
}

func (b bridge) Sinks() []api.Component {
	var out []api.Component
	for _, e := range b.s.Sinks {
		out = append(out, api.Component{Name: e.Name, Type: e.Type, Where: e.Where, Policy: e.Policy})
	}
	return out
}

func (b bridge) StopReceiver(name string) error  { return b.s.StopReceiver(name) }
func (b bridge) StartReceiver(name string) error { return b.s.StartReceiver(name) }

func (b bridge) AddReceiver(typ, name string, settings map[string]any) (api.Component, error) {
	c := config.NewComponent(typ, settings)
	c.Name = name
	ep, err := b.s.AddReceiver(c)
	return api.Component{Name: ep.Name, Type: ep.Type, Where: ep.Where}, err
}

func (b bridge) ReceiverConfig(name string) (string, pipeline.Config, bool, error) {
	c, ok := b.s.ReceiverConfig(name)
	if !ok {
		return "", nil, false, nil
	}
	rf := b.s.Factories().Receiver(c.Type)
	if rf == nil {
		return c.Type, nil, true, nil
	}
	cfg := rf.NewConfig()
	if err := c.Decode(cfg); err != nil {
		return c.Type, nil, true, err
	}
	return c.Type, cfg, true, nil
}

func (b bridge) SetReceiverKey(name, key string, v any) error {
	return b.s.SetReceiverKey(name, key, v)
}
func (b bridge) Config() ([]byte, error)        { return b.s.Config() }
func (b bridge) Factories() *pipeline.Factories { return b.s.Factories() }
func (b bridge) Catalog() *record.Catalog       { return b.s.Catalog() }
func (b bridge) DataDir() string                { return b.s.base.DataDir }

func (b bridge) Delivered() (int64, time.Duration) {
	st := b.s.Engine.Stats()
	return st.Records, st.Elapsed
}
func (b bridge) Traces() trace.Stats { return b.s.Engine.TraceStats() }

// ReceiverConfig returns a receiver's configuration.
func (s *Server) ReceiverConfig(name string) (config.Component, bool) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	for _, c := range s.cfg.Receivers {
		if c.Name == name {
			return c, true
		}
	}
	return config.Component{}, false
}

// SetReceiverKey sets a key of a receiver's configuration; it applies
// when the receiver is started again.
func (s *Server) SetReceiverKey(name, key string, v any) error {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	for i := range s.cfg.Receivers {
		if s.cfg.Receivers[i].Name == name {
			s.cfg.Receivers[i].Set(key, v)
			return nil
		}
	}
	return fmt.Errorf("no receiver %s", name)
}
