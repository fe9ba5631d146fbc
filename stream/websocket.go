package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
	// MaxClients caps the connected clients (DefaultMaxClients when 0); a
	// client beyond it is closed right after the handshake with 1013 (try
	// again later) and a reason naming the limit.
	MaxClients int
	// MaxClientBuffer bounds the bytes of the messages waiting for one
	// client (DefaultMaxClientBuffer when 0); a client that lets more pile
	// up is closed with CloseTooSlow and the reason "client too slow".
	MaxClientBuffer int
}

// Limits of the WebSocket endpoint.
const (
	DefaultMaxClients      = 64
	DefaultMaxClientBuffer = 4 << 20
	// CloseTooSlow is the close code for a client that fell behind by more
	// than MaxClientBuffer bytes.
	CloseTooSlow = 4008
)

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
//	  (records, gaps and traces of a cluster's repository carry "node":
//	  the node that received them; the metadata is every node's joined)
//	  (with "unclosedRun":R when run R ended without closing its stream)
//	{"kind":"trace","host":"…","trace":{…}}
//	{"kind":"error","error":"…"}                         then the server closes
//
// Records come in the order the bridge received them, grouped into a
// message per delivery (at most maxWSRecords). Bad input (an unknown
// parameter or type, a malformed time) is answered with HTTP 400 before the
// upgrade. A
// browser that reads slowly slows only its own subscription, which reads
// the repository at its pace and reports a gap when retention overtakes
// it; one that falls behind by MaxClientBuffer bytes and takes nothing for
// wsSlowAfter is closed with CloseTooSlow. Beyond MaxClients clients, a
// new one is closed with 1013 (try again later).
type Handler struct {
	url string
	opt HandlerOptions
	log *slog.Logger
	up  websocket.Upgrader

	mu      sync.Mutex
	base    *Stream // the shared connection, made on first use
	clients int     // connected clients
}

const (
	maxWSRecords = 512
	wsWriteWait  = 10 * time.Second
	// wsSlowAfter: a client that takes no message for this long while
	// MaxClientBuffer bytes wait for it is too slow. It is shorter than
	// wsWriteWait, so the message in flight can still be followed by the
	// close frame that says why.
	wsSlowAfter  = 5 * time.Second
	wsFlushEvery = 50 * time.Millisecond
)

// NewHandler returns the WebSocket endpoint of the stream at url. It
// connects on the first request; Close ends its connection.
func NewHandler(url string, o HandlerOptions) *Handler {
	h := &Handler{url: url, opt: o, log: o.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.opt.MaxClients <= 0 {
		h.opt.MaxClients = DefaultMaxClients
	}
	if h.opt.MaxClientBuffer <= 0 {
		h.opt.MaxClientBuffer = DefaultMaxClientBuffer
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
	if msg := unknownParams(r.URL.Query()); msg != "" {
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	if !h.join() {
		// A browser sees no HTTP status of a failed handshake: it is told
		// by the close frame.
		if conn, err := h.up.Upgrade(w, r, nil); err == nil {
			conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseTryAgainLater,
				fmt.Sprintf("too many live clients (limit %d)", h.opt.MaxClients)), time.Now().Add(time.Second))
			conn.Close()
		}
		return
	}
	defer h.leave()
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
	ws := newWSWriter(conn, cancel, h.opt.MaxClientBuffer, func() {
		h.log.Warn("stream websocket: client too slow; closed", "remote", r.RemoteAddr, "max_client_buffer", h.opt.MaxClientBuffer)
	})
	go ws.run()
	// A cluster's nodes each have their metadata: the browser gets them
	// joined (MergeMetadata), as one repository's.
	var nodes []*Metadata
	s.OnMetadata(func(m *Metadata) {
		i := slices.IndexFunc(nodes, func(o *Metadata) bool { return o.Node == m.Node })
		if i < 0 {
			nodes = append(nodes, m)
		} else {
			nodes[i] = m
		}
		ws.flush()
		ws.json(map[string]any{"kind": "metadata", "metadata": MergeMetadata(nodes)})
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
		if g.Node != "" {
			m["node"] = g.Node
		}
		if g.UnclosedRun != 0 {
			m["unclosedRun"] = g.UnclosedRun
		}
		ws.json(m)
	})
	if q.Get("traces") == "1" {
		s.OnTrace(func(t *Trace) {
			ws.flush()
			m := map[string]any{"kind": "trace", "host": t.Host, "trace": json.RawMessage(t.JSON)}
			if t.Node != "" {
				m["node"] = t.Node
			}
			ws.json(m)
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
	ws.finish()
}

// join takes a client's place, false when MaxClients are connected.
func (h *Handler) join() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clients >= h.opt.MaxClients {
		return false
	}
	h.clients++
	return true
}

func (h *Handler) leave() {
	h.mu.Lock()
	h.clients--
	h.mu.Unlock()
}

// wsParams are the query parameters ServeHTTP reads.
var wsParams = []string{"type", "host", "since", "from_seq", "traces"}

// unknownParams names the parameters of q that ServeHTTP does not read, as
// the HTTP API does for its endpoints ("" when there are none).
func unknownParams(q url.Values) string {
	var bad []string
	for k := range q {
		if !slices.Contains(wsParams, k) {
			bad = append(bad, strconv.Quote(k))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	return fmt.Sprintf("unknown parameter %s (GET /api/live takes %s)", strings.Join(bad, ", "), strings.Join(wsParams, ", "))
}

// wsWriter batches records into messages and queues them for its own
// goroutine (run), which writes them to the socket. The bytes queued, the message being built
// and the one being written count against max (one message alone may be
// larger); a client that lets more pile up is too slow: its queue is
// dropped, its subscription cancelled, and it is closed with CloseTooSlow
// after the message in flight. Up to that the stream's goroutine waits for
// room (the subscription goes at the client's pace) as long as the client
// takes a message every wsSlowAfter.
type wsWriter struct {
	conn   *websocket.Conn
	cancel context.CancelFunc
	max    int

	mu      sync.Mutex
	buf     []byte   // the records message being built
	n       int      // its records
	queue   [][]byte // messages waiting for the socket
	held    int      // bytes of queue, buf and the message being written
	slow    bool
	failed  bool
	closing bool
	// writing: when the message being written was taken off the queue
	// (zero: none); its write deadline is wsWriteWait after it.
	writing time.Time
	wake    chan struct{} // run has work
	took    chan struct{} // run wrote a message
	done    chan struct{} // run returned
	onSlow  func()        // called once, when the client is found too slow
}

func newWSWriter(conn *websocket.Conn, cancel context.CancelFunc, max int, onSlow func()) *wsWriter {
	return &wsWriter{conn: conn, cancel: cancel, max: max, onSlow: onSlow,
		wake: make(chan struct{}, 1), took: make(chan struct{}, 1), done: make(chan struct{})}
}

func (w *wsWriter) record(e *Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.slow || w.failed {
		return
	}
	before := len(w.buf)
	if w.n == 0 {
		w.buf = append(w.buf[:0], `{"kind":"records","records":[`...)
		before = 0
	} else {
		w.buf = append(w.buf, ',')
	}
	w.buf = append(w.buf, `{"host":`...)
	w.buf = jsonl.AppendString(w.buf, e.Host)
	if e.Node != "" {
		w.buf = append(w.buf, `,"node":`...)
		w.buf = jsonl.AppendString(w.buf, e.Node)
	}
	w.buf = append(w.buf, `,"seq":`...)
	w.buf = strconv.AppendUint(w.buf, e.Seq, 10)
	w.buf = append(w.buf, `,"time":`...)
	w.buf = strconv.AppendInt(w.buf, e.Time.UnixNano(), 10)
	w.buf = append(w.buf, `,"record":`...)
	w.buf = jsonl.AppendRecord(w.buf, &e.Record)
	w.buf = append(w.buf[:len(w.buf)-1], '}') // AppendRecord ends the line
	w.n++
	w.held += len(w.buf) - before
	if w.n >= maxWSRecords || len(w.buf)+2 > w.max {
		w.flushLocked()
	}
	w.roomLocked(2)
}

// roomLocked waits (w.mu held, released while waiting) until the client
// holds at most max bytes with extra more, counting the message being
// built only when something else waits too. A client that takes nothing
// for wsSlowAfter meanwhile is too slow.
func (w *wsWriter) roomLocked(extra int) {
	over := func() bool {
		return !w.slow && !w.failed && w.held+extra > w.max && w.held > len(w.buf)
	}
	if !over() {
		return
	}
	// The client is too slow wsSlowAfter after the write it has not
	// taken began (not after this wait began): the message in flight then
	// still has wsWriteWait-wsSlowAfter to go, and the close frame after
	// it, for a client that reads now.
	timer := time.NewTimer(w.slowIn())
	defer timer.Stop()
	for over() {
		w.mu.Unlock()
		select {
		case <-w.took:
			w.mu.Lock()
			timer.Reset(w.slowIn())
		case <-timer.C:
			w.mu.Lock()
			if over() {
				w.tooSlow()
			}
			return
		}
	}
}

// slowIn is how long the client may still take nothing (w.mu held).
func (w *wsWriter) slowIn() time.Duration {
	if w.writing.IsZero() {
		return wsSlowAfter
	}
	return max(wsSlowAfter-time.Since(w.writing), 0)
}

func (w *wsWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
}

// flushLocked queues the records message (w.mu held).
func (w *wsWriter) flushLocked() {
	if w.n == 0 || w.slow || w.failed {
		return
	}
	w.buf = append(w.buf, "]}"...)
	w.held += 2
	w.queue = append(w.queue, w.buf)
	w.buf, w.n = nil, 0
	w.signal()
}

func (w *wsWriter) json(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
	w.roomLocked(len(b))
	if w.slow || w.failed {
		return
	}
	w.held += len(b)
	w.queue = append(w.queue, b)
	w.signal()
}

// tooSlow drops what waits for the client and ends its subscription
// (w.mu held).
func (w *wsWriter) tooSlow() {
	w.slow = true
	w.queue, w.buf, w.n = nil, nil, 0
	w.held = 0
	w.cancel()
	w.signal()
	w.onSlow()
}

func (w *wsWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *wsWriter) tookOne() {
	select {
	case w.took <- struct{}{}:
	default:
	}
}

// run writes the queued messages until finish; a browser that does not
// take one within wsWriteWait ends the subscription. It ends with the
// close frame.
func (w *wsWriter) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.slow && !w.closing {
			w.mu.Unlock()
			<-w.wake
			w.mu.Lock()
		}
		if w.slow || w.failed || len(w.queue) == 0 {
			slow, failed := w.slow, w.failed
			w.mu.Unlock()
			switch {
			case slow:
				w.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseTooSlow,
					fmt.Sprintf("client too slow: more than %d bytes waiting", w.max)), time.Now().Add(wsWriteWait))
			case !failed:
				w.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			}
			return
		}
		b := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.writing = time.Now()
		w.mu.Unlock()
		w.conn.SetWriteDeadline(w.writing.Add(wsWriteWait))
		err := w.conn.WriteMessage(websocket.TextMessage, b)
		w.mu.Lock()
		w.writing = time.Time{}
		if !w.slow {
			w.held -= len(b)
		}
		if err != nil {
			w.failed = true
			w.queue = nil
			w.cancel()
		}
		w.tookOne()
		w.mu.Unlock()
	}
}

// finish lets run write what is queued and the close frame, and waits
// for it.
func (w *wsWriter) finish() {
	w.mu.Lock()
	w.closing = true
	w.signal()
	w.mu.Unlock()
	<-w.done
}
