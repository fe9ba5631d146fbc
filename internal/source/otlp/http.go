package otlp

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	otlpcodec "github.com/tracebridge/tracebridge/internal/codec/otlp"
	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

var discard = slog.New(slog.DiscardHandler)

// TracesPath is where otlp-http takes trace exports.
const TracesPath = "/v1/traces"

// HTTP is the otlp-http receiver: POST /v1/traces with a protobuf or JSON
// body, plain or gzip-compressed.
type HTTP struct {
	c     *core
	cfg   Config
	ln    net.Listener
	srv   *http.Server
	tls   *tls.Config
	gz    sync.Pool // *gzip.Reader
	ran   atomic.Bool
	close sync.Once
}

var _ pipeline.Receiver = (*HTTP)(nil)

// NewHTTP binds the listener; Run serves.
func NewHTTP(cfg Config, set pipeline.Settings) (*HTTP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	set = withDefaults(set)
	cfg = cfg.withDefaults(DefaultHTTPMessageSize)
	tc, err := cfg.TLS.config()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrComm, fmt.Errorf("otlp-http: %w", err))
	}
	c := newCore(set.Name, set, cfg)
	h := &HTTP{c: c, cfg: cfg, ln: counted{Listener: ln, met: c.met}, tls: tc}
	h.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		TLSConfig:         tc,
		ErrorLog:          slog.NewLogLogger(set.Logger.Handler(), slog.LevelDebug),
	}
	listenpolicy.Warn(set.Logger, "receiver "+set.Name, ln.Addr().String(), tc != nil)
	return h, nil
}

// Addr returns the bound address.
func (h *HTTP) Addr() net.Addr { return h.ln.Addr() }

// Where says where the receiver listens.
func (h *HTTP) Where() string {
	w := "listening on " + h.ln.Addr().String()
	if h.tls != nil {
		w += " (TLS)"
	}
	return w
}

// Run serves until ctx is cancelled, then shuts down gracefully.
func (h *HTTP) Run(ctx context.Context, out pipeline.Consumer) error {
	h.ran.Store(true)
	h.c.start(out)
	defer h.c.stop()
	served := make(chan error, 1)
	go func() {
		if h.tls != nil {
			served <- h.srv.ServeTLS(h.ln, "", "")
			return
		}
		served <- h.srv.Serve(h.ln)
	}()
	select {
	case err := <-served:
		h.srv.Close()
		return pipeline.Classify(pipeline.ErrComm, fmt.Errorf("otlp-http: %w", err))
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(h.cfg.DrainTimeout))
	defer cancel()
	if err := h.srv.Shutdown(sctx); err != nil {
		h.c.log.Warn("otlp-http: requests still running at the drain timeout; closing", "receiver", h.c.name)
		h.srv.Close()
	}
	<-served
	return nil
}

// Close releases the listener when Run is not going to run. It is safe
// to call twice, and a no-op after Run.
func (h *HTTP) Close() error {
	if h.ran.Load() {
		return nil
	}
	h.close.Do(func() {
		h.srv.Close()
		h.ln.Close()
	})
	return nil
}

// Content types.
const (
	typeProto = "application/x-protobuf"
	typeJSON  = "application/json"
)

// Status codes of google.rpc.Status.
const (
	rpcInvalidArgument   = 3
	rpcResourceExhausted = 8
	rpcUnavailable       = 14
	rpcUnauthenticated   = 16
)

// errTooLarge: the body exceeds max_message_size (after decompression).
var errTooLarge = errors.New("body too large")

// errBudget: reading the body would pass max_inflight_bytes.
var errBudget = errors.New("in-flight budget exhausted")

func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != TracesPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, false, http.StatusMethodNotAllowed, rpcInvalidArgument, "use POST")
		return
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var json bool
	switch ct {
	case typeProto, "application/protobuf":
	case typeJSON:
		json = true
	default:
		h.fail(w, false, http.StatusUnsupportedMediaType, rpcInvalidArgument,
			fmt.Sprintf("content type %q: want %s or %s", ct, typeProto, typeJSON))
		return
	}
	remote, _ := net.ResolveTCPAddr("tcp", r.RemoteAddr) // an IP:port: no lookup
	host, drop, err := h.c.admit(r.Context(), r.Header.Get("Authorization"), remote)
	switch {
	case errors.Is(err, hostauth.ErrUnauthorized):
		w.Header().Set("WWW-Authenticate", `Bearer realm="tracebridge"`)
		h.fail(w, json, http.StatusUnauthorized, rpcUnauthenticated, err.Error())
		return
	case err != nil:
		h.fail(w, json, http.StatusServiceUnavailable, rpcUnavailable, err.Error())
		return
	}
	if !h.c.admitMemory() {
		w.Header().Set("Retry-After", strconv.Itoa(int(retryDelay/time.Second)))
		h.fail(w, json, http.StatusTooManyRequests, rpcResourceExhausted, memoryMessage)
		return
	}
	max := h.cfg.MaxMessageSize
	var body io.Reader = http.MaxBytesReader(w, r.Body, int64(max))
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
		if r.ContentLength > int64(max) {
			h.fail(w, json, http.StatusRequestEntityTooLarge, rpcInvalidArgument,
				fmt.Sprintf("body of %d bytes exceeds max_message_size %d", r.ContentLength, max))
			return
		}
	case "gzip", "x-gzip":
		zr, err := h.gzipReader(body)
		if err != nil {
			h.fail(w, json, http.StatusBadRequest, rpcInvalidArgument, "gzip: "+err.Error())
			return
		}
		defer h.gz.Put(zr)
		body = zr
	default:
		h.fail(w, json, http.StatusUnsupportedMediaType, rpcInvalidArgument,
			fmt.Sprintf("content encoding %q: want gzip or none", enc))
		return
	}
	wk := h.c.getWorker()
	defer h.c.putWorker(wk)
	held := 0 // bytes taken from the receiver's in-flight budget
	defer func() { h.c.inflight.release(held) }()
	msg, err := readBody(wk.buf[:0], body, max, r.ContentLength, func(capacity int) bool {
		if capacity <= held {
			return true
		}
		if !h.c.inflight.acquire(capacity - held) {
			return false
		}
		held = capacity
		return true
	})
	wk.buf = msg[:0]
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.Is(err, errBudget):
			w.Header().Set("Retry-After", strconv.Itoa(int(retryDelay/time.Second)))
			h.fail(w, json, http.StatusTooManyRequests, rpcResourceExhausted,
				fmt.Sprintf("more than max_inflight_bytes %d bytes of requests in flight; retry later", h.c.inflight.max))
		case errors.Is(err, errTooLarge), errors.As(err, &mbe):
			h.fail(w, json, http.StatusRequestEntityTooLarge, rpcInvalidArgument,
				fmt.Sprintf("body exceeds max_message_size %d", max))
		default:
			h.fail(w, json, http.StatusBadRequest, rpcInvalidArgument, "reading the body: "+err.Error())
		}
		return
	}
	o, err := h.c.handle(r.Context(), wk, r.RemoteAddr, host, drop, msg, json)
	if err != nil {
		var bad *otlpcodec.Error
		switch {
		case errors.As(err, &bad):
			h.fail(w, json, http.StatusBadRequest, rpcInvalidArgument, err.Error())
		case errors.Is(err, ErrBusy):
			w.Header().Set("Retry-After", strconv.Itoa(int(retryDelay/time.Second)))
			h.fail(w, json, http.StatusTooManyRequests, rpcResourceExhausted, "the pipeline is busy (back-pressure); retry later")
		case errors.Is(err, ErrStopped):
			w.Header().Set("Retry-After", strconv.Itoa(int(retryDelay/time.Second)))
			h.fail(w, json, http.StatusServiceUnavailable, rpcUnavailable, "the receiver is stopping")
		default: // the client went away
			h.fail(w, json, http.StatusServiceUnavailable, rpcUnavailable, err.Error())
		}
		return
	}
	var out []byte
	if json {
		w.Header().Set("Content-Type", typeJSON)
		out = appendResponseJSON(nil, o)
	} else {
		w.Header().Set("Content-Type", typeProto)
		out = appendResponse(nil, o)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}

// fail answers with an HTTP status and a google.rpc.Status body, in JSON
// for a JSON request.
func (h *HTTP) fail(w http.ResponseWriter, json bool, httpStatus, code int, msg string) {
	var out []byte
	if json {
		w.Header().Set("Content-Type", typeJSON)
		out = appendStatusJSON(nil, code, msg)
	} else {
		w.Header().Set("Content-Type", typeProto)
		out = appendStatus(nil, code, msg)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(httpStatus)
	w.Write(out)
}

func (h *HTTP) gzipReader(r io.Reader) (*gzip.Reader, error) {
	if zr, ok := h.gz.Get().(*gzip.Reader); ok {
		if err := zr.Reset(r); err != nil {
			h.gz.Put(zr)
			return nil, err
		}
		return zr, nil
	}
	return gzip.NewReader(r)
}

// readBody reads r into buf, failing with errTooLarge beyond max bytes.
// Before buf gets a capacity it calls reserve with it (for a reused buf
// first with its own), and fails with errBudget when reserve refuses.
func readBody(buf []byte, r io.Reader, max int, size int64, reserve func(capacity int) bool) ([]byte, error) {
	want := cap(buf)
	if size > 0 && size <= int64(max) && want < int(size) {
		want = int(size) + 1 // +1: room to see EOF without growing
	}
	if want == 0 {
		want = 32 << 10
	}
	if !reserve(want) {
		return buf, errBudget
	}
	if want > cap(buf) {
		buf = make([]byte, 0, want)
	}
	for {
		if len(buf) == cap(buf) {
			if len(buf) > max {
				return buf, errTooLarge
			}
			c := min(2*cap(buf), max+1)
			if !reserve(c) {
				return buf, errBudget
			}
			grown := make([]byte, len(buf), c)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), max+1)])
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			return buf, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
