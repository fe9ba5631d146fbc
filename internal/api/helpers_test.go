package api

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// build makes a trace of spans in any order whose ParentID say the tree:
// it puts them in tree order (roots and children by start) and sets
// Parent and Depth, as the assembler does.
func build(id trace.ID, spans []trace.Span) *trace.Trace {
	byID := map[trace.SpanID]int{}
	for i, s := range spans {
		byID[s.SpanID] = i
	}
	kids := map[int][]int{}
	var roots []int
	for i, s := range spans {
		if p, ok := byID[s.ParentID]; ok && s.ParentID != 0 && p != i {
			kids[p] = append(kids[p], i)
		} else {
			roots = append(roots, i)
		}
	}
	byStart := func(a, b int) int { return cmp.Or(cmp.Compare(spans[a].Start, spans[b].Start), cmp.Compare(a, b)) }
	slices.SortFunc(roots, byStart)
	t := &trace.Trace{ID: id}
	var walk func(i int, parent int32, depth int32)
	walk = func(i int, parent int32, depth int32) {
		s := spans[i]
		s.Parent, s.Depth = parent, depth
		if s.OrderIndex == 0 && s.Source == trace.FromSpan {
			s.OrderIndex, s.EOI, s.ESS = -1, -1, -1
		}
		t.Spans = append(t.Spans, s)
		me := int32(len(t.Spans) - 1)
		ks := kids[i]
		slices.SortFunc(ks, byStart)
		for _, k := range ks {
			walk(k, me, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, -1, 0)
	}
	return t
}

// span returns an OTLP-like span.
func span(id, parent uint64, svc, op string, kind trace.Kind, start time.Time, d time.Duration, attrs ...trace.Attr) trace.Span {
	return trace.Span{SpanID: trace.SpanID(id), ParentID: trace.SpanID(parent), Service: svc, Host: "host-" + strings.TrimPrefix(svc, "svc-"),
		Operation: op, Component: "otlpsend", Kind: kind, Start: start.UnixNano(), End: start.Add(d).UnixNano(), Attributes: attrs, Source: trace.FromSpan}
}

func sattr(k, v string) trace.Attr { return trace.Attr{Key: k, Value: v, Type: trace.TypeString} }
func iattr(k string, v int) trace.Attr {
	return trace.Attr{Key: k, Value: fmt.Sprint(v), Type: trace.TypeInt}
}

// shop makes n traces like the ones of /work/shared/jaeger-api: services
// svc-0 to svc-4 calling each other (CLIENT → SERVER), a PRODUCER →
// CONSUMER hop with a link, a "SELECT orders" CLIENT span with db.*
// attributes; every 10th trace fails in the database with an exception
// event. Trace i starts at base + i ms.
func shop(n int, base time.Time) []*trace.Trace {
	var out []*trace.Trace
	for i := range n {
		at := base.Add(time.Duration(i) * time.Millisecond)
		id := trace.ID{Hi: 0xdeb5769f7c931766, Lo: uint64(i + 1)}
		var spans []trace.Span
		next := uint64(i+1) << 16
		add := func(parent uint64, svc, op string, kind trace.Kind, off, d time.Duration, attrs ...trace.Attr) uint64 {
			next++
			spans = append(spans, span(next, parent, svc, op, kind, at.Add(off), d, attrs...))
			return next
		}
		root := add(0, "svc-0", "GET /api/orders/{id}", trace.KindServer, 0, 7*time.Millisecond,
			sattr("http.route", "/api/orders/{id}"), iattr("http.status_code", 200), sattr("url.path", fmt.Sprintf("/api/orders/%d", i)))
		pub := add(root, "svc-0", "jobs publish", trace.KindProducer, 50*time.Microsecond, 200*time.Microsecond, sattr("messaging.system", "inproc"))
		cons := add(pub, "svc-0", "jobs process", trace.KindConsumer, 60*time.Microsecond, 180*time.Microsecond, sattr("messaging.system", "inproc"))
		spans[len(spans)-1].Links = []trace.Link{{TraceID: id, SpanID: trace.SpanID(pub)}}
		_ = cons
		c1 := add(root, "svc-0", "GET svc-1", trace.KindClient, time.Millisecond, 5*time.Millisecond, sattr("peer.service", "svc-1"))
		s1 := add(c1, "svc-1", fmt.Sprintf("GET /svc-1/op%d", 1+i%2), trace.KindServer, 1100*time.Microsecond, 4800*time.Microsecond)
		for j, callee := range []string{"svc-2", "svc-3", "svc-4"} {
			off := time.Duration(1200+j*1000) * time.Microsecond
			c := add(s1, "svc-1", "GET "+callee, trace.KindClient, off, 900*time.Microsecond, sattr("peer.service", callee))
			add(c, callee, fmt.Sprintf("GET /%s/op1", callee), trace.KindServer, off+50*time.Microsecond, 800*time.Microsecond)
		}
		db := add(s1, "svc-1", "SELECT orders", trace.KindClient, 4300*time.Microsecond, 400*time.Microsecond,
			sattr("db.system", "postgresql"), sattr("db.statement", "SELECT id, total FROM orders WHERE id = $1"))
		if i%10 == 9 {
			s := &spans[len(spans)-1]
			s.Error, s.Status, s.StatusMessage = true, trace.StatusError, "deadlock detected"
			s.Events = []trace.Event{{Name: "exception", Time: at.Add(4500 * time.Microsecond).UnixNano(),
				Attributes: []trace.Attr{sattr("exception.type", "*main.backendError"), sattr("exception.message", "deadlock detected")}}}
		}
		_ = db
		out = append(out, build(id, spans))
	}
	return out
}

// env is an API over a store of traces, served on loopback.
type env struct {
	t     *testing.T
	st    *store.Store
	hosts *hostdb.DB
	api   *API
	srv   *httptest.Server
}

var (
	tokenOnce       sync.Once
	testTok, tokHsh string
)

// testToken returns a token and a cheap argon2id hash of it (1 MiB, one
// pass: CheckSecret takes the parameters from the hash), so that tests
// do not spend seconds in argon2id; TestTokens checks the real ones.
func testToken() (string, string) {
	tokenOnce.Do(func() {
		testTok = "tbt_test-token"
		salt := []byte("0123456789abcdef")
		key := argon2.IDKey([]byte(testTok), salt, 1, 1024, 1, 32)
		enc := base64.RawStdEncoding
		tokHsh = fmt.Sprintf("$argon2id$v=%d$m=1024,t=1,p=1$%s$%s", argon2.Version, enc.EncodeToString(salt), enc.EncodeToString(key))
	})
	return testTok, tokHsh
}

func newEnv(t *testing.T, opt func(*Options), traces ...*trace.Trace) *env {
	t.Helper()
	hosts, err := hostdb.Open(t.TempDir(), hostdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{Hosts: hostTable{hosts}})
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) > 0 {
		if _, err := st.Append(traces); err != nil {
			t.Fatal(err)
		}
		if err := st.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	_, hash := testToken()
	tokens, err := NewTokens([]string{hash})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Store: func() *store.Store { return st }, Tokens: tokens}
	if opt != nil {
		opt(&o)
	}
	if o.Shared == nil {
		o.Shared = &pipeline.Shared{}
	}
	o.Shared.SetHostDB(hosts)
	e := &env{t: t, st: st, hosts: hosts, api: New(o)}
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(func() {
		e.srv.Close()
		e.api.Close()
		st.Close()
		hosts.Close()
	})
	return e
}

// hostTable is the host table as the store asks it (the store sink wires
// the same).
type hostTable struct{ db *hostdb.DB }

func (t hostTable) Policy(name string) store.HostPolicy { return store.HostPolicy(t.db.Policy(name)) }
func (t hostTable) Contact(name string, at time.Time)   { t.db.Contact(name, at) }

// do sends a request; hdr are header name, value pairs.
func (e *env) do(method, path, body string, hdr ...string) (int, []byte, http.Header) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// get fetches path and decodes a 200's JSON into v (v nil: not decoded).
func (e *env) get(path string, v any) []byte {
	e.t.Helper()
	code, b, _ := e.do("GET", path, "")
	if code != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			e.t.Fatalf("GET %s: %v\n%s", path, err, b)
		}
	}
	return b
}

// write sends a request with the test token.
func (e *env) write(method, path, body string) (int, []byte) {
	e.t.Helper()
	tok, _ := testToken()
	code, b, _ := e.do(method, path, body, "Authorization", "Bearer "+tok, "Content-Type", "application/json")
	return code, b
}

// keys returns the keys of a JSON object in their order.
func keys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var out []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
