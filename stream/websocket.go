package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
)

// HandlerOptions configure the WebSocket endpoint.
type HandlerOptions struct {
	// Options connect to the stream.
	Options
	// CheckOrigin decides whether a browser page may connect (nil: only
	// pages of the same origin as the endpoint).
	CheckOrigin func(r *http.Request) bool
	// Logger hears about failed connections (nil: discarded).
	Logger *slog.Logger
}

// Handler serves the stream over WebSocket: each connection is a
// subscription, chosen by the query string:
//
//	type=T (repeatable; full or short names), host=H (repeatable),
//	since=10m|RFC3339 or from_seq=N (the past, then live; default live),
//	traces=1 (assembled traces too)
//
// The server sends JSON text messages:
//
//	{"kind":"metadata","metadata":{…}}                    first, and on change
//	{"kind":"records","records":[{"host":"…","seq":N,"time":NS,
//	   "record":{"type":"…","loggingTimestamp":N,"fields":{…}}},…]}
//	{"kind":"gap","type":"…","host":"…","records":N,"bridgeLost":N}
//	  (with "unclosedRun":R when run R ended without closing its stream)
//	{"kind":"trace","host":"…","trace":{…}}
//	{"kind":"error","error":"…"}                         then the server closes
//
// Records come in the order the bridge received them, grouped into a
// message per delivery (at most maxWSRecords). Bad input (an unknown type,
// a malformed time) is answered with HTTP 400 before the upgrade. A
// browser that reads slowly slows only its own subscription, which reads
// the repository at its pace and reports a gap when retention overtakes
// it.
type Handler struct {
	url string
	opt HandlerOptions
	log *slog.Logger
	up  websocket.Upgrader

	mu   sync.Mutex
	base *Stream // the shared connection, made on first use
}

const (
	maxWSRecords = 512
	wsWriteWait  = 10 * time.Second
	wsFlushEvery = 50 * time.Millisecond
)

// NewHandler returns the WebSocket endpoint of the stream at url. It
// connects on the first request; Close ends its connection.
func NewHandler(url string, o HandlerOptions) *Handler {
	h := &Handler{url: url, opt: o, log: o.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	// A page that sent its token as a subprotocol (the HTTP API's
	// tracebridge.bearer) gets that protocol back, never the token.
	h.up = websocket.Upgrader{CheckOrigin: o.CheckOrigin, ReadBufferSize: 1024, WriteBufferSize: 64 << 10, Subprotocols: []string{"tracebridge.bearer"}}
	return h
}

// Close closes the handler's connection to the stream (subscriptions end).
func (h *Handler) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.base != nil {
		h.base.nc.Close()
		h.base = nil
	}
	return nil
}

func (h *Handler) stream() (*Stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.base == nil || h.base.nc.IsClosed() {
		s, err := Open(h.url, h.opt.Options)
		if err != nil {
			return nil, err
		}
		h.base = s
	}
	return h.base.fork(), nil
}

// ServeHTTP upgrades the request and streams until the browser goes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "a WebSocket endpoint: connect with a WebSocket client (Upgrade: websocket)", http.StatusBadRequest)
		return
	}
	s, err := h.stream()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer s.Close()
	md, err := s.Metadata(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	q := r.URL.Query()
	types, err := ResolveTypes(md, q["type"])
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.SetHosts(q["host"]...)
	switch since, seq := q.Get("since"), q.Get("from_seq"); {
	case since != "" && seq != "":
		http.Error(w, "since and from_seq exclude each other", http.StatusBadRequest)
		return
	case since != "":
		t, err := ParseTime(since, time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.SetStartTime(t)
	case seq != "":
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil || n == 0 {
			http.Error(w, fmt.Sprintf("from_seq %q: want a sequence number from 1", seq), http.StatusBadRequest)
			return
		}
		s.SetStartSequence(n)
	}
	conn, err := h.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The browser sends nothing we need; reading notices that it left.
	go func() {
		defer cancel()
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()
	ws := &wsWriter{conn: conn, cancel: cancel}
	s.OnMetadata(func(m *Metadata) {
		ws.flush()
		ws.json(map[string]any{"kind": "metadata", "metadata": m})
	})
	handle := func(e *Event) {
		ws.record(e)
	}
	if len(types) == 0 {
		s.OnEvent("", handle)
	}
	for _, t := range types {
		s.OnEvent(t, handle)
	}
	s.OnGap(func(g Gap) {
		ws.flush()
		m := map[string]any{"kind": "gap", "type": g.Type, "host": g.Host, "records": g.Records, "bridgeLost": g.BridgeLost}
		if g.UnclosedRun != 0 {
			m["unclosedRun"] = g.UnclosedRun
		}
		ws.json(m)
	})
	if q.Get("traces") == "1" {
		s.OnTrace(func(t *Trace) {
			ws.flush()
			ws.json(map[string]any{"kind": "trace", "host": t.Host, "trace": json.RawMessage(t.JSON)})
		})
	}
	s.OnFlush(ws.flush)
	s.OnError(func(err error) {
		h.log.Warn("stream websocket: a message could not be read", "err", err)
	})
	// Records are flushed when the stream is caught up, or every
	// wsFlushEvery while it is not.
	go func() {
		t := time.NewTicker(wsFlushEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				ws.flush()
			}
		}
	}()
	if err := s.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		ws.json(map[string]any{"kind": "error", "error": err.Error()})
	}
	ws.flush()
	conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
}

// wsWriter batches records into messages; the stream's goroutine and a
// ticker write through it.
type wsWriter struct {
	mu     sync.Mutex
	conn   *websocket.Conn
	cancel context.CancelFunc
	buf    []byte
	n      int
	failed bool
}

func (w *wsWriter) record(e *Event) {
	w.mu.Lock()
	if w.n == 0 {
		w.buf = append(w.buf[:0], `{"kind":"records","records":[`...)
	} else {
		w.buf = append(w.buf, ',')
	}
	w.buf = append(w.buf, `{"host":`...)
	w.buf = jsonl.AppendString(w.buf, e.Host)
	w.buf = append(w.buf, `,"seq":`...)
	w.buf = strconv.AppendUint(w.buf, e.Seq, 10)
	w.buf = append(w.buf, `,"time":`...)
	w.buf = strconv.AppendInt(w.buf, e.Time.UnixNano(), 10)
	w.buf = append(w.buf, `,"record":`...)
	w.buf = jsonl.AppendRecord(w.buf, &e.Record)
	w.buf = append(w.buf[:len(w.buf)-1], '}') // AppendRecord ends the line
	w.n++
	full := w.n >= maxWSRecords
	w.mu.Unlock()
	if full {
		w.flush()
	}
}

func (w *wsWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		return
	}
	w.buf = append(w.buf, "]}"...)
	w.write(w.buf)
	w.n = 0
}

func (w *wsWriter) json(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.write(b)
}

// write sends one text message (w.mu held); a browser that does not take
// it within wsWriteWait ends the subscription.
func (w *wsWriter) write(b []byte) {
	if w.failed {
		return
	}
	w.conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
	if err := w.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		w.failed = true
		w.cancel()
	}
}
