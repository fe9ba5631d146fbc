package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/store"
)

// Options are what the API serves from. Only Store is needed for the
// trace endpoints; what is nil answers 503 with a message.
type Options struct {
	Logger *slog.Logger
	// Store returns the trace store (nil when the bridge keeps none). It
	// is called per request.
	Store func() *store.Store
	// Console is the running bridge: receivers, sinks, the console.
	Console Console
	// Counters are the bridge's record and trace counts.
	Counters Counters
	// Cluster is the node's cluster (GET /api/v1/cluster); nil: the one
	// the cluster publishes in Shared (internal/clusterstatus), and 404
	// when there is none (a bridge that runs alone).
	Cluster Cluster
	// Metrics is the bridge's registry: /metrics and the console's
	// connections, rates and queue depths.
	Metrics *metrics.Registry
	// Shared holds the services components publish: Live (the
	// http.Handler for /api/live) and Profiles (flame graphs of sampled
	// stacks).
	Shared *pipeline.Shared
	// Tokens may write (nil: nobody may write).
	Tokens *Tokens
	// ReadTokenRequired: reads need a token from loopback too.
	ReadTokenRequired bool
	// UI serves everything outside /api, /metrics and the health
	// endpoints (the web UI); nil: a short text index.
	UI http.Handler
	// Version is reported by /api/v1/status.
	Version string
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// API is the HTTP API of one bridge.
type API struct {
	opt Options
	log *slog.Logger
	mux *http.ServeMux
	cop *http.CrossOriginProtection

	// gate: requests that use the store hold it shared; Close takes it.
	gate    sync.RWMutex
	closed  bool
	ctx     context.Context // cancelled by Close: loops over traces stop
	cancel  context.CancelFunc
	rates   rateTracker
	started time.Time
}

// New returns the API.
func New(o Options) *API {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Store == nil {
		o.Store = func() *store.Store { return nil }
	}
	a := &API{opt: o, log: o.Logger, mux: http.NewServeMux(), cop: http.NewCrossOriginProtection(), started: o.Now()}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusForbidden, "cross-origin request refused: writes must come from the API's own origin"))
	}))
	for i := range routes {
		rt := &routes[i]
		a.mux.Handle(rt.pattern(), a.wrap(rt))
	}
	a.mux.Handle("/", a.wrap(&rootRoute))
	return a
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Close stops the API from using the store: requests that do are
// cancelled and waited for (at most 5 s); later ones get 503. It is safe
// to call twice.
func (a *API) Close() {
	a.cancel()
	done := make(chan struct{})
	go func() {
		a.gate.Lock()
		a.closed = true
		a.gate.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		a.log.Warn("http api: requests still reading the trace store at shutdown")
	}
}

// apiError is an error with its HTTP status.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &apiError{code, fmt.Sprintf(format, args...)}
}

// Sentinel answers.
var (
	errNoStore  = errorf(http.StatusServiceUnavailable, "no trace store: this bridge runs without a store sink (serve --no-store, or no `type: store` sink)")
	errClosed   = errorf(http.StatusServiceUnavailable, "the bridge is stopping")
	errNoBridge = errorf(http.StatusServiceUnavailable, "no bridge: the API runs without one")
)

// errorBody is every error's JSON.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, err.Error()}
	}
	writeJSON(w, ae.code, errorBody{ae.msg})
}

// writeJSON writes v as JSON with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// call is one request to a route.
type call struct {
	a   *API
	rt  *route
	w   http.ResponseWriter
	r   *http.Request
	ctx context.Context
	params
	writer bool // the caller presented a valid token
}

// json answers v with 200.
func (c *call) json(v any) error {
	writeJSON(c.w, http.StatusOK, v)
	return nil
}

// raw answers b with 200 and a content type.
func (c *call) raw(ctype string, b []byte) error {
	c.w.Header().Set("Content-Type", ctype)
	c.w.Write(b)
	return nil
}

// store returns the trace store (the request holds the gate: the store
// stays open until it ends).
func (c *call) store() (*store.Store, error) {
	st := c.a.opt.Store()
	if st == nil {
		return nil, errNoStore
	}
	return st, nil
}

// withStore makes a route's handler of a handler that reads the trace
// store: without a store the route answers 503.
func withStore(h func(c *call, st *store.Store) error) func(*call) error {
	return func(c *call) error {
		st, err := c.store()
		if err != nil {
			return err
		}
		return h(c, st)
	}
}

type ctxKey struct{}

// CanWrite reports whether the request (to a handler the API mounted,
// such as /api/live) presented a valid API token.
func CanWrite(ctx context.Context) bool {
	v, _ := ctx.Value(ctxKey{}).(bool)
	return v
}

// wrap runs a route: headers, authentication, the gate, parameters,
// panics.
func (a *API) wrap(rt *route) http.Handler {
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		if rt.h != nil {
			hd.Set("Cache-Control", "no-store")
		}
		writer, err := a.authorize(rt, r)
		if err != nil {
			if ae := (*apiError)(nil); errors.As(err, &ae) && ae.code == http.StatusUnauthorized {
				hd.Set("WWW-Authenticate", `Bearer realm="tracebridge"`)
			}
			a.fail(w, r, rt, err)
			return
		}
		if rt.h == nil { // a mounted handler (the UI, /metrics, /api/live)
			rt.serve(a, w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, writer)))
			return
		}
		a.gate.RLock()
		defer a.gate.RUnlock()
		if a.closed && rt.auth != authNone { // health and the description stay
			a.fail(w, r, rt, errClosed)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(a.ctx, cancel)
		defer stop()
		c := &call{a: a, rt: rt, w: w, r: r, ctx: ctx, writer: writer}
		c.params = params{rt: rt, q: r.URL.Query(), path: r.PathValue}
		if err := c.params.unknown(); err != nil {
			a.fail(w, r, rt, err)
			return
		}
		defer func() {
			if p := recover(); p != nil {
				a.log.Error("http api: handler panicked", "path", rt.path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				a.fail(w, r, rt, errorf(http.StatusInternalServerError, "internal error"))
			}
		}()
		if err := rt.h(c); err != nil {
			a.fail(w, r, rt, err)
		}
	}))
	if rt.auth == authWrite {
		h = a.cop.Handler(h)
	}
	return h
}

// fail answers an error (in Jaeger's envelope on Jaeger's routes) and
// logs server faults.
func (a *API) fail(w http.ResponseWriter, r *http.Request, rt *route, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, err.Error()}
	}
	if ae.code >= 500 && ae.code != http.StatusServiceUnavailable {
		a.log.Error("http api: request failed", "method", r.Method, "path", rt.path, "err", ae.msg)
	}
	if rt.jaeger {
		writeJaegerError(w, ae.code, ae.msg)
		return
	}
	writeError(w, ae)
}

// rootRoute serves what no other route does: the UI, or an index; under
// /api/ a 404 or, for a path of another method, a 405.
var rootRoute = route{path: "/", auth: authRead, mount: func(a *API) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			var allow []string
			for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
				if m == r.Method {
					continue
				}
				if _, pattern := a.mux.Handler(&http.Request{Method: m, URL: r.URL, Host: r.Host}); pattern != "/" && pattern != "" {
					allow = append(allow, m)
				}
			}
			if len(allow) > 0 {
				w.Header().Set("Allow", strings.Join(allow, ", "))
				writeError(w, errorf(http.StatusMethodNotAllowed, "%s %s: want %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
				return
			}
			writeError(w, errorf(http.StatusNotFound, "no such endpoint: %s (the API is under /api/v1; /api/openapi.json describes it)", r.URL.Path))
			return
		}
		if a.opt.UI != nil {
			a.opt.UI.ServeHTTP(w, r)
			return
		}
		if r.URL.Path != "/" {
			writeError(w, errorf(http.StatusNotFound, "no such page: %s (the API is under /api/v1; /api/openapi.json describes it)", r.URL.Path))
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, strings.TrimLeft(index, "\n"))
	})
}}

const index = `
tracebridge HTTP API

  /api/v1/…           the REST API (docs/API.md)
  /api/openapi.json   its OpenAPI description
  /api/…              Jaeger's query API (services, operations, traces, dependencies)
  /metrics            Prometheus metrics
  /healthz, /readyz   health and readiness
`
