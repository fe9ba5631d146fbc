package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
	"github.com/tracebridge/tracebridge/internal/servicetest"
)

func TestS3Conformance(t *testing.T) {
	srv := objstoretest.Start(t)
	base := srv.Bucket(t, "conformance", "")
	var n atomic.Int64
	objstoretest.Conformance(t, func(t *testing.T) objstore.Store {
		cfg := base
		cfg.Prefix = fmt.Sprintf("run%d/", n.Add(1)) // an empty store each
		cfg.PartSize = 5 << 20                       // objstoretest.Large goes in parts
		return newS3(t, cfg)
	})
}

// newS3 opens a store of cfg.
func newS3(t *testing.T, cfg objstore.S3Config) *objstore.S3 {
	t.Helper()
	s, err := objstore.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func bg(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// Keys live under the prefix, as objects of the bucket, and stores with
// other prefixes do not see them.
func TestS3Prefix(t *testing.T) {
	srv := objstoretest.Start(t)
	cfg := srv.Bucket(t, "traces", "prod") // no trailing slash: one is added
	prod := newS3(t, cfg)
	cfg.Prefix = "dev/"
	dev := newS3(t, cfg)
	if err := prod.Put(bg(t), "blocks/1/data", []byte("prod data")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(srv.Dir, "traces", "prod", "blocks", "1", "data"))
	if err != nil || string(b) != "prod data" {
		t.Fatalf("the object in the server's directory: %q, %v", b, err)
	}
	if objs, err := dev.List(bg(t), ""); err != nil || len(objs) != 0 {
		t.Fatalf("another prefix lists %+v, %v", objs, err)
	}
	if _, err := dev.Get(bg(t), "blocks/1/data"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("another prefix gets %v", err)
	}
	if !strings.Contains(prod.String(), srv.Endpoint+"/traces/prod") {
		t.Fatalf("the store calls itself %q", prod.String())
	}
}

// Credentials from the environment when no key files are configured.
func TestS3EnvCredentials(t *testing.T) {
	srv := objstoretest.Start(t)
	cfg := srv.Bucket(t, "env", "")
	cfg.AccessKeyFile, cfg.SecretKeyFile = "", ""
	t.Setenv("AWS_ACCESS_KEY_ID", objstoretest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", objstoretest.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	s := newS3(t, cfg)
	if err := s.Put(bg(t), "k", []byte("v")); err != nil {
		t.Fatalf("put with the environment's credentials: %v", err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	s = newS3(t, cfg)
	if err := s.Put(bg(t), "k", []byte("v")); !errors.Is(err, objstore.ErrDenied) {
		t.Fatalf("put with a wrong secret from the environment: %v", err)
	}
}

// An object removed from the server (by another process) between List and
// Get.
func TestS3Vanished(t *testing.T) {
	srv := objstoretest.Start(t)
	s := newS3(t, srv.Bucket(t, "vanish", "p/"))
	if err := s.Put(bg(t), "blocks/7/index", []byte("index")); err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(bg(t), "blocks/")
	if err != nil || len(objs) != 1 {
		t.Fatalf("list: %+v, %v", objs, err)
	}
	if err := os.Remove(filepath.Join(srv.Dir, "vanish", "p", "blocks", "7", "index")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(bg(t), objs[0].Key)
	if !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("get: %v; want ErrNotExist", err)
	}
	objstoretest.CheckError(t, err, "get", "blocks/7/index")
	_, err = s.GetRange(bg(t), objs[0].Key, 1, 2)
	if !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("get range: %v; want ErrNotExist", err)
	}
}

// The server is down: the client tries a bounded number of times, then
// says so, naming the endpoint, the key and the reason.
func TestS3ServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	cfg := objstore.S3Config{Endpoint: "http://" + addr, Bucket: "down", MaxAttempts: 3, RetryWait: 10 * time.Millisecond}
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	s := newS3(t, cfg)
	err = s.Put(bg(t), "blocks/1/data", []byte("x"))
	if err == nil {
		t.Fatal("put to a server that is down succeeded")
	}
	objstoretest.CheckError(t, err, "put", "blocks/1/data")
	for _, want := range []string{"s3 http://" + addr + "/down", "unreachable after 3 attempts", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}

	// The retries end with the caller's context.
	cfg.MaxAttempts, cfg.RetryWait = 1000, time.Second
	s = newS3(t, cfg)
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = s.Get(c, "k")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("get with a context ending: %v", err)
	}
	if c.Err() == nil {
		t.Fatal("get returned before its context ended or its attempts ran out")
	}
}

// fault is what the proxy does with a request.
type fault int

const (
	pass    fault = iota
	fail500       // answer 500, as a failing server
	fail503       // answer 503, as a load balancer in front of a busy server
	drop          // close the connection without an answer
	stall         // answer nothing until the client gives up
	noRange       // answer a range with 200 and no Content-Range, as a server ignoring ranges
)

// rangeless turns a 206 answer into a 200 without Content-Range.
type rangeless struct{ http.ResponseWriter }

func (w rangeless) WriteHeader(code int) {
	w.Header().Del("Content-Range")
	if code == http.StatusPartialContent {
		code = http.StatusOK
	}
	w.ResponseWriter.WriteHeader(code)
}

// faultProxy is a real HTTP reverse proxy in front of versitygw that
// injects faults into the requests it is told to.
type faultProxy struct {
	srv *httptest.Server

	mu        sync.Mutex
	plan      []fault // for the next requests, in order
	always    fault   // after the plan
	requests  []string
	abandoned int // stalled requests the client gave up on
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true // no idle connections left to the test's end
	rp := &httputil.ReverseProxy{Transport: tr, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the signature covers the host the client used
	}}
	p := &faultProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		f := p.always
		if len(p.plan) > 0 {
			f, p.plan = p.plan[0], p.plan[1:]
		}
		p.requests = append(p.requests, r.Method+" "+r.URL.RequestURI())
		p.mu.Unlock()
		switch f {
		case fail500:
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		case fail503:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "503 Service Unavailable", http.StatusServiceUnavailable)
			return
		case drop:
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		case stall:
			// Read the body first: the server notices a client that hangs
			// up only once it has.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			select {
			case <-r.Context().Done():
				p.mu.Lock()
				p.abandoned++
				p.mu.Unlock()
				return
			case <-time.After(2 * time.Minute):
			}
		}
		if f == noRange {
			w = rangeless{w}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { p.srv.CloseClientConnections(); p.srv.Close() })
	return p
}

// set replaces the plan; it returns the count of requests so far.
func (p *faultProxy) set(always fault, plan ...fault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.always, p.plan = always, plan
	return len(p.requests)
}

func (p *faultProxy) since(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests[n:]...)
}

func (p *faultProxy) stats() (abandoned, planLeft int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.abandoned, len(p.plan)
}

// proxied returns a store that reaches srv's bucket through a fault proxy.
func proxied(t *testing.T, srv *objstoretest.Server, bucket string) (*faultProxy, objstore.S3Config) {
	p := newFaultProxy(t, srv.Endpoint)
	cfg := srv.Bucket(t, bucket, "p/")
	cfg.Endpoint = p.srv.URL
	return p, cfg
}

func TestS3Retries(t *testing.T) {
	srv := objstoretest.Start(t)
	p, cfg := proxied(t, srv, "retries")
	cfg.MaxAttempts = 5
	// The stalled answers end the attempt after this; an answer of the
	// real server this slow (a loaded machine) is one more retry.
	cfg.Timeout = time.Second
	s := newS3(t, cfg)
	if err := s.Put(bg(t), "seed", []byte("seed")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		plan []fault
	}{
		{"503", []fault{fail503, fail503, fail503}},
		{"500", []fault{fail500, fail500}},
		{"connection lost", []fault{drop, drop}},
		{"slow", []fault{stall, stall}},
		{"mixed", []fault{fail503, drop, stall, fail500}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ops := []struct {
				name string
				do   func() error
			}{
				{"put", func() error { return s.Put(bg(t), "k/"+c.name, []byte(c.name)) }},
				{"get", func() error {
					b, err := s.Get(bg(t), "k/"+c.name)
					if err == nil && string(b) != c.name {
						err = fmt.Errorf("got %q", b)
					}
					return err
				}},
				{"get range", func() error {
					b, err := s.GetRange(bg(t), "k/"+c.name, 1, 2)
					if err == nil && string(b) != c.name[1:3] {
						err = fmt.Errorf("got %q", b)
					}
					return err
				}},
				{"list", func() error {
					objs, err := s.List(bg(t), "k/"+c.name)
					if err == nil && (len(objs) != 1 || objs[0].Size != int64(len(c.name))) {
						err = fmt.Errorf("got %+v", objs)
					}
					return err
				}},
				{"delete", func() error { return s.Delete(bg(t), "k/"+c.name) }},
			}
			for _, op := range ops {
				abandonedBefore, _ := p.stats()
				n := p.set(pass, c.plan...)
				if err := op.do(); err != nil {
					t.Fatalf("%s after %v: %v", op.name, c.plan, err)
				}
				_, left := p.stats()
				if left != 0 {
					t.Fatalf("%s succeeded with %d faults left of %v: not through the proxy?", op.name, left, c.plan)
				}
				if got := len(p.since(n)); got < len(c.plan)+1 {
					t.Fatalf("%s: %d requests for %d faults: %q", op.name, got, len(c.plan), p.since(n))
				}
				stalls := 0
				for _, f := range c.plan {
					if f == stall {
						stalls++
					}
				}
				// The client gave up on every stalled answer instead of
				// waiting for it.
				waitFor(t, func() bool { a, _ := p.stats(); return a-abandonedBefore == stalls }, "the client abandons the stalled requests")
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	servicetest.WaitFor(t, 30*time.Second, what, cond)
}

// A server that keeps failing: a bounded number of attempts, then a clear
// error.
func TestS3RetriesRunOut(t *testing.T) {
	srv := objstoretest.Start(t)
	p, cfg := proxied(t, srv, "runout")
	cfg.MaxAttempts = 4
	s := newS3(t, cfg)
	for _, c := range []struct {
		f    fault
		want string
	}{
		{fail503, "server error 503 Service Unavailable after 4 attempts"},
		{fail500, "server error 500 Internal Server Error after 4 attempts"},
		{drop, "after 4 attempts"},
	} {
		n := p.set(c.f)
		err := s.Put(bg(t), "blocks/x", []byte("x"))
		if err == nil {
			t.Fatalf("put through %v succeeded", c.f)
		}
		objstoretest.CheckError(t, err, "put", "blocks/x")
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p.srv.URL+"/runout/p") {
			t.Errorf("%q does not say %q and the endpoint", err, c.want)
		}
		if got := len(p.since(n)); got != 4 {
			t.Errorf("%d requests for 4 attempts: %q", got, p.since(n))
		}
	}
}

// Wrong credentials: a clear error at once, no retries.
func TestS3WrongCredentials(t *testing.T) {
	srv := objstoretest.Start(t)
	p, good := proxied(t, srv, "creds")
	for _, c := range []struct {
		name, access, secret string
	}{
		{"wrong secret", objstoretest.AccessKey, "not-the-secret"},
		{"unknown access key", "nobody", objstoretest.SecretKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := srv.Config(t, "creds", "p/", c.access, c.secret)
			cfg.Endpoint = good.Endpoint
			s := newS3(t, cfg)
			for _, op := range []struct {
				name string
				do   func() error
			}{
				{"put", func() error { return s.Put(bg(t), "k", []byte("v")) }},
				{"get", func() error { _, err := s.Get(bg(t), "k"); return err }},
				{"list", func() error { _, err := s.List(bg(t), ""); return err }},
				{"delete", func() error { return s.Delete(bg(t), "k") }},
			} {
				n := p.set(pass)
				err := op.do()
				if !errors.Is(err, objstore.ErrDenied) {
					t.Fatalf("%s: %v; want ErrDenied", op.name, err)
				}
				want := "s3 " + good.Endpoint + "/creds/p: " + op.name + ` "`
				if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "wrong credentials") {
					t.Fatalf("%s: %q does not say %q and wrong credentials", op.name, err, want)
				}
				if got := p.since(n); len(got) != 1 {
					t.Fatalf("%s: %d requests with wrong credentials, want 1: %q", op.name, len(got), got)
				}
			}
		})
	}
	// The right ones still work through the same proxy.
	if err := newS3(t, good).Put(bg(t), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

// A bucket that does not exist: a clear error, no retries.
func TestS3NoBucket(t *testing.T) {
	srv := objstoretest.Start(t)
	p, cfg := proxied(t, srv, "exists")
	cfg.Bucket = "does-not-exist"
	s := newS3(t, cfg)
	n := p.set(pass)
	err := s.Put(bg(t), "k", []byte("v"))
	if err == nil || !strings.Contains(err.Error(), "bucket does not exist") || !strings.Contains(err.Error(), "/does-not-exist/") {
		t.Fatalf("put to a missing bucket: %v", err)
	}
	if got := p.since(n); len(got) != 1 {
		t.Fatalf("%d requests to a missing bucket, want 1: %q", len(got), got)
	}
}

// Objects above the part size go up in parts (a multipart upload) and
// come back whole; the server sees the parts.
func TestS3Multipart(t *testing.T) {
	srv := objstoretest.Start(t)
	p, cfg := proxied(t, srv, "multipart")
	cfg.PartSize = 5 << 20
	s := newS3(t, cfg)
	data := make([]byte, 11<<20+1)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	n := p.set(pass)
	// A part fails once; the upload is retried and still whole.
	p.set(pass, pass, pass, fail503)
	if err := s.Put(bg(t), "big", data); err != nil {
		t.Fatal(err)
	}
	t.Logf("requests: %q", p.since(n))
	parts := 0
	for _, r := range p.since(n) {
		if strings.HasPrefix(r, "PUT ") && strings.Contains(r, "partNumber=") {
			parts++
		}
	}
	if parts < 3 {
		t.Fatalf("%d part uploads for %d bytes in parts of 5MiB: %q", parts, len(data), p.since(n))
	}
	// The failed attempt's upload was aborted, not left to take space.
	if up := srv.IncompleteUploads(t, "multipart"); len(up) != 0 {
		t.Fatalf("incomplete uploads left: %q", up)
	}
	got, err := s.Get(bg(t), "big")
	if err != nil || string(got) != string(data) {
		t.Fatalf("get of the multipart object: %d bytes, %v", len(got), err)
	}
	st, err := os.Stat(filepath.Join(srv.Dir, "multipart", "p", "big"))
	if err != nil || st.Size() != int64(len(data)) {
		t.Fatalf("the object on the server: %v, %v", st, err)
	}
}

func TestS3ConfigValidate(t *testing.T) {
	ok := objstore.S3Config{Endpoint: "http://127.0.0.1:9000", Bucket: "traces"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*objstore.S3Config)
		want string
	}{
		{"no endpoint", func(c *objstore.S3Config) { c.Endpoint = "" }, "no endpoint"},
		{"scheme", func(c *objstore.S3Config) { c.Endpoint = "ftp://x" }, "http or https"},
		{"no scheme", func(c *objstore.S3Config) { c.Endpoint = "127.0.0.1:9000" }, "endpoint"},
		{"path", func(c *objstore.S3Config) { c.Endpoint = "http://h:1/x" }, "without a path"},
		{"bucket", func(c *objstore.S3Config) { c.Bucket = "Bad_Bucket" }, "bucket"},
		{"no bucket", func(c *objstore.S3Config) { c.Bucket = "" }, "bucket"},
		{"prefix", func(c *objstore.S3Config) { c.Prefix = "a//b" }, "prefix"},
		{"one key file", func(c *objstore.S3Config) { c.AccessKeyFile = "/x" }, "go together"},
		{"part size", func(c *objstore.S3Config) { c.PartSize = 1 << 20 }, "part_size"},
		{"attempts", func(c *objstore.S3Config) { c.MaxAttempts = -1 }, "max_attempts"},
	} {
		cfg := ok
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
	}
	// Key files that cannot be read.
	cfg := ok
	cfg.AccessKeyFile, cfg.SecretKeyFile = filepath.Join(t.TempDir(), "none"), "/x"
	if _, err := objstore.NewS3(cfg); err == nil || !strings.Contains(err.Error(), "access_key_file") {
		t.Errorf("missing key file: %v", err)
	}
}

// HTTPS: the endpoint's scheme turns TLS on; a certificate the system does
// not trust fails at once (no retries), unless insecure is set.
func TestS3TLS(t *testing.T) {
	srv := objstoretest.StartTLS(t)
	cfg := srv.Bucket(t, "tls", "p/")
	if !strings.HasPrefix(cfg.Endpoint, "https://") {
		t.Fatalf("endpoint %s", cfg.Endpoint)
	}
	cfg.MaxAttempts = 5
	err := newS3(t, cfg).Put(bg(t), "k", []byte("v"))
	if err == nil || !strings.Contains(err.Error(), "TLS failed") || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("put to a server with an untrusted certificate: %v", err)
	}
	objstoretest.CheckError(t, err, "put", "k")
	cfg.Insecure = true
	s := newS3(t, cfg)
	if err := s.Put(bg(t), "k", []byte("over tls")); err != nil {
		t.Fatalf("put with insecure: %v", err)
	}
	if b, err := s.Get(bg(t), "k"); err != nil || string(b) != "over tls" {
		t.Fatalf("get with insecure: %q, %v", b, err)
	}
}

// A listing of several pages whose second page fails goes on after the
// last key received: every key once.
func TestS3ListResumes(t *testing.T) {
	srv := objstoretest.Start(t)
	p, cfg := proxied(t, srv, "pages")
	s := newS3(t, cfg)
	const n = 1500 // pages of 1000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.Put(bg(t), fmt.Sprintf("b/%05d", i), nil); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	start := p.set(pass, pass, fail503, drop)
	objs, err := s.List(bg(t), "b/")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != n {
		t.Fatalf("%d objects listed, want %d", len(objs), n)
	}
	for i, o := range objs {
		if want := fmt.Sprintf("b/%05d", i); o.Key != want {
			t.Fatalf("object %d is %s, want %s", i, o.Key, want)
		}
	}
	reqs := p.since(start)
	if len(reqs) != 4 || !strings.Contains(reqs[3], "start-after=p%2Fb%2F00999") {
		t.Fatalf("requests: %q; want the fourth to start after the first page", reqs)
	}
}

// A server that answers a range with other bytes (no Content-Range) is
// not believed.
func TestS3IgnoredRange(t *testing.T) {
	srv := objstoretest.Start(t)
	p, cfg := proxied(t, srv, "ranges")
	s := newS3(t, cfg)
	if err := s.Put(bg(t), "k", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	p.set(pass, noRange)
	b, err := s.GetRange(bg(t), "k", 3, 4)
	if err == nil || !strings.Contains(err.Error(), "Content-Range") {
		t.Fatalf("range answered without Content-Range: %q, %v", b, err)
	}
	objstoretest.CheckError(t, err, "get range", "k")
	if b, err := s.GetRange(bg(t), "k", 3, 4); err != nil || string(b) != "3456" {
		t.Fatalf("range: %q, %v", b, err)
	}
}
