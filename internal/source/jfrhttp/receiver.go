package jfrhttp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/jsonstr"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// retryAfter is the delay a client is told to wait after a 429 or 503.
const retryAfter = "1"

// maxHostLen bounds the host name an upload's name may give.
const maxHostLen = 255

// Receiver is the jfr-http receiver.
type Receiver struct {
	cfg    Config
	name   string
	log    *slog.Logger
	met    *metrics.Receiver
	shared *pipeline.Shared
	filter func(string) bool
	types  *codec.TypeSet
	ln     net.Listener
	srv    *http.Server
	tls    *tls.Config
	slots  chan struct{} // one per upload being read (max_uploads)
	seq    atomic.Int64  // uploads so far: an upload's Session
	seen   *seenChunks   // nil: duplicates: keep
	faults lograte.Limiter
	ran    atomic.Bool
	close  sync.Once

	// mu is held for reading by every upload while it hands records on,
	// so Run (holding it for writing at its end) waits for those in
	// flight; uploads after that find out nil.
	mu  sync.RWMutex
	out pipeline.Consumer
	em  pipeline.Emitter
}

var _ pipeline.Receiver = (*Receiver)(nil)

// New binds the listener; Run serves.
func New(cfg Config, set pipeline.Settings) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	cfg = cfg.withDefaults()
	tc, err := cfg.TLS.tlsConfig()
	if err != nil {
		return nil, err
	}
	filter, _ := codec.NewFilter(cfg.Types...)
	log := set.Logger
	if log == nil {
		log = slog.Default()
	}
	if set.Name == "" {
		set.Name = Type
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrComm, fmt.Errorf("%s: %w", Type, err))
	}
	r := &Receiver{cfg: cfg, name: set.Name, log: log, met: set.Metrics.Receiver(set.Name), shared: set.Shared,
		filter: filter, types: codec.NewTypeSet(), ln: ln, tls: tc, slots: make(chan struct{}, cfg.MaxUploads),
		faults: lograte.Limiter{PerSecond: 5}}
	if cfg.Duplicates == DuplicatesSkip {
		r.seen = &seenChunks{}
	}
	r.srv = &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Duration(cfg.ReadTimeout),
		WriteTimeout:      time.Duration(cfg.ReadTimeout) + time.Duration(cfg.EmitTimeout),
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		TLSConfig:         tc,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	listenpolicy.Warn(log, "receiver "+set.Name, ln.Addr().String(), tc != nil)
	return r, nil
}

// Addr returns the bound address.
func (r *Receiver) Addr() net.Addr { return r.ln.Addr() }

// Where says where the receiver listens.
func (r *Receiver) Where() string {
	w := "listening on " + r.ln.Addr().String() + " (POST " + IngestPath
	if r.tls != nil {
		w += ", TLS"
	}
	return w + ")"
}

// Run serves until ctx is cancelled, then shuts down gracefully.
func (r *Receiver) Run(ctx context.Context, out pipeline.Consumer) error {
	r.ran.Store(true)
	r.mu.Lock()
	r.out = out
	r.em, _ = out.(pipeline.Emitter)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.out, r.em = nil, nil
		r.mu.Unlock()
	}()
	served := make(chan error, 1)
	go func() {
		if r.tls != nil {
			served <- r.srv.ServeTLS(r.ln, "", "")
			return
		}
		served <- r.srv.Serve(r.ln)
	}()
	select {
	case err := <-served:
		r.srv.Close()
		return pipeline.Classify(pipeline.ErrComm, fmt.Errorf("%s: %w", Type, err))
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.cfg.DrainTimeout))
	defer cancel()
	if err := r.srv.Shutdown(sctx); err != nil {
		r.log.Warn("jfr-http: uploads still running at the drain timeout; closing", "receiver", r.name)
		r.srv.Close()
	}
	<-served
	return nil
}

// Close releases the listener when Run is not going to run. It is safe
// to call twice, and a no-op after Run.
func (r *Receiver) Close() error {
	if r.ran.Load() {
		return nil
	}
	r.close.Do(func() {
		r.srv.Close()
		r.ln.Close()
	})
	return nil
}

// errStopped: the receiver is not running (yet, or any more).
var errStopped = errors.New("receiver stopped")

// errBusy: the pipeline did not take a batch within the emit timeout.
var errBusy = errors.New("pipeline busy")

// upload is what a request asked and what became of it.
type upload struct {
	host        string
	from, until int64 // Unix seconds as given (0: not given)
	drop        bool  // a disabled host: read, not handed on
	res         result
	bytes       int64
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != IngestPath {
		r.fail(w, nil, errorf(http.StatusNotFound, "no such path %q: uploads go to %s", req.URL.Path, IngestPath))
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.fail(w, nil, errorf(http.StatusMethodNotAllowed, "use POST"))
		return
	}
	up, perr := r.params(req)
	if perr != nil {
		r.fail(w, nil, perr)
		return
	}
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	default:
		w.Header().Set("Retry-After", retryAfter)
		r.fail(w, nil, errorf(http.StatusTooManyRequests, "more than max_uploads %d uploads at once; retry later", r.cfg.MaxUploads))
		return
	}
	if req.ContentLength > r.cfg.MaxBodySize {
		r.fail(w, nil, errorf(http.StatusRequestEntityTooLarge, "body of %d bytes exceeds max_body_size %d", req.ContentLength, r.cfg.MaxBodySize))
		return
	}
	sent := &limited{r: http.MaxBytesReader(w, req.Body, r.cfg.MaxBodySize), n: r.cfg.MaxBodySize}
	rec, err := openRecording(sent, req.Header.Get("Content-Type"), req.Header.Get("Content-Encoding"))
	if err != nil {
		r.fail(w, up, r.classify(err, req))
		return
	}
	plain := &limited{r: rec, n: r.cfg.MaxBodySize}
	err = r.read(req.Context(), req.RemoteAddr, up, plain)
	up.bytes = plain.read
	r.met.Bytes(int(sent.read))
	if err != nil {
		r.fail(w, up, r.classify(err, req))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(appendAnswer(nil, up, ""))
}

// params reads the query and the credentials.
func (r *Receiver) params(req *http.Request) (*upload, *Error) {
	q := req.URL.Query()
	if f := q.Get("format"); f != "" && f != "jfr" {
		return nil, errorf(http.StatusUnsupportedMediaType, "format %q: this receiver takes format=jfr", f)
	}
	up := &upload{}
	var err *Error
	if up.from, err = unixSeconds("from", q.Get("from")); err != nil {
		return nil, err
	}
	if up.until, err = unixSeconds("until", q.Get("until")); err != nil {
		return nil, err
	}
	if up.from != 0 && up.until != 0 && up.until < up.from {
		return nil, errorf(http.StatusBadRequest, "until %d is before from %d", up.until, up.from)
	}
	if r.cfg.Security {
		host, drop, aerr := r.admit(req)
		if aerr != nil {
			return nil, aerr
		}
		up.host, up.drop = host, drop
		return up, nil
	}
	up.host, err = hostOf(q.Get("name"))
	return up, err
}

// hostOf returns the host an upload's name gives: Pyroscope's application
// name with its labels in braces cut off.
func hostOf(name string) (string, *Error) {
	if i := strings.IndexByte(name, '{'); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", errorf(http.StatusBadRequest, "name missing: name=APP names the host the events belong to")
	case len(name) > maxHostLen:
		return "", errorf(http.StatusBadRequest, "name of %d bytes: at most %d", len(name), maxHostLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", errorf(http.StatusBadRequest, "name %q holds control characters", name)
	}
	return name, nil
}

// unixSeconds parses Pyroscope's from or until: Unix seconds, or
// milliseconds, microseconds or nanoseconds told apart by their size.
func unixSeconds(key, s string) (int64, *Error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, errorf(http.StatusBadRequest, "%s=%q: want Unix seconds", key, s)
	}
	for v > 1e11 { // later than the year 5138 in seconds: a finer unit
		v /= 1000
	}
	return v, nil
}

// admit checks the bearer token against the host table.
func (r *Receiver) admit(req *http.Request) (host string, drop bool, _ *Error) {
	hosts := r.shared.Hosts()
	if hosts == nil {
		return "", false, errorf(http.StatusServiceUnavailable, "security is on but the bridge has no host table")
	}
	auth := req.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		token, ok = strings.CutPrefix(auth, "bearer ")
	}
	if !ok || strings.TrimSpace(token) == "" {
		return "", false, errorf(http.StatusUnauthorized, "%v: no bearer token", hostauth.ErrUnauthorized)
	}
	remote, _ := net.ResolveTCPAddr("tcp", req.RemoteAddr) // an IP:port: no lookup
	name, adm, err := hosts.HostByToken(req.Context(), strings.TrimSpace(token), remote)
	if err != nil {
		r.faults.Log(req.Context(), r.log, slog.LevelWarn, "JFR upload refused", "receiver", r.name, "peer", req.RemoteAddr, "err", err)
		if errors.Is(err, hostauth.ErrUnauthorized) {
			return "", false, errorf(http.StatusUnauthorized, "%v", err)
		}
		return "", false, errorf(http.StatusServiceUnavailable, "%v", err)
	}
	switch adm {
	case hostauth.Admitted:
		return name, false, nil
	case hostauth.Disabled:
		return name, true, nil
	}
	return "", false, errorf(http.StatusUnauthorized, "%v: host %s is not admitted", hostauth.ErrUnauthorized, name)
}

// read decodes the recording and hands its records on.
func (r *Receiver) read(ctx context.Context, peer string, up *upload, rec *limited) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.out == nil {
		return errStopped
	}
	b := &record.Batch{}
	b.Origin = record.Origin{Receiver: r.name, Peer: peer, Host: up.host, Session: "upload-" + strconv.FormatInt(r.seq.Add(1), 10)}
	d := decoder{
		stream:    codec.NewStream(codec.Options{Filter: r.filter, Types: r.types}),
		batchSize: r.cfg.BatchSize,
		emit:      func(b *record.Batch) (*record.Batch, error) { return r.emit(ctx, b, up.drop) },
		skipped: func(err error) {
			r.met.DecodeError()
			r.faults.Log(ctx, r.log, slog.LevelWarn, "jfr-http: malformed event skipped", "receiver", r.name, "peer", peer, "host", up.host, "err", err)
		},
		host: up.host,
	}
	if !up.drop {
		d.seen = r.seen
	}
	var err error
	up.res, err = d.decode(&chunkReader{r: rec, max: r.cfg.MaxChunkSize}, b)
	return err
}

// emit hands a batch on within the emit timeout (ownership moves) and
// returns an empty one. The caller holds r.mu for reading.
func (r *Receiver) emit(ctx context.Context, b *record.Batch, drop bool) (*record.Batch, error) {
	if drop {
		b.Reset()
		return b, nil
	}
	r.met.Records(b)
	ectx, cancel := context.WithTimeout(ctx, time.Duration(r.cfg.EmitTimeout))
	defer cancel()
	var err error
	if r.em != nil {
		var nb *record.Batch
		if nb, err = r.em.Emit(ectx, b); err == nil {
			return nb, nil
		}
	} else if err = r.out.Consume(ectx, b); err == nil {
		b.Reset()
		return b, nil
	}
	switch {
	case errors.Is(err, pipeline.ErrClosed):
		return nil, errStopped
	case ectx.Err() != nil && ctx.Err() == nil:
		return nil, errBusy
	}
	return nil, err
}

// classify turns an upload's error into the answer's status and reason.
func (r *Receiver) classify(err error, req *http.Request) *Error {
	var e *Error
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, errTooLarge), errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, "body exceeds max_body_size %d", r.cfg.MaxBodySize)
	case errors.Is(err, errBusy):
		return errorf(http.StatusTooManyRequests, "the pipeline is busy (back-pressure); retry later")
	case errors.Is(err, errStopped):
		return errorf(http.StatusServiceUnavailable, "the receiver is stopping")
	case req.Context().Err() != nil:
		return errorf(http.StatusBadRequest, "the client went away: %v", err)
	}
	return errorf(http.StatusBadRequest, "reading the body: %v", readReason(err))
}

// fail answers an error; up, when known, adds what was handed on before.
func (r *Receiver) fail(w http.ResponseWriter, up *upload, e *Error) {
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tracebridge"`)
	}
	if e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge {
		r.met.DecodeError()
		host := ""
		if up != nil {
			host = up.host
		}
		r.faults.Log(context.Background(), r.log, slog.LevelWarn, "jfr-http: upload refused", "receiver", r.name, "host", host, "status", e.Status, "err", e.Reason)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	if up == nil {
		up = &upload{}
	}
	w.Write(appendAnswer(nil, up, e.Reason))
}

// appendAnswer appends the JSON answer of an upload.
func appendAnswer(dst []byte, up *upload, reason string) []byte {
	dst = append(dst, '{')
	if reason != "" {
		dst = append(dst, `"error":`...)
		dst = jsonstr.AppendString(dst, reason)
		dst = append(dst, ',')
	}
	dst = fmt.Appendf(dst, `"chunks":%d,"events":%d,"duplicates":%d,"skipped":%d,"bytes":%d`, up.res.Chunks, up.res.Events, up.res.Duplicates, up.res.Skipped, up.bytes)
	if up.host != "" {
		dst = append(dst, `,"host":`...)
		dst = jsonstr.AppendString(dst, up.host)
	}
	if up.from != 0 || up.until != 0 {
		dst = fmt.Appendf(dst, `,"from":%d,"until":%d`, up.from, up.until)
	}
	return append(dst, "}\n"...)
}
