// Package objstoretest gives tests a real S3 server: the Versity S3
// gateway (versitygw, github.com/versity/versitygw v1.8.0) serving a
// temporary directory through its posix backend on a free loopback port.
// It is an S3 server of its own (it answers SigV4-signed requests,
// multipart uploads, paged listings and S3's error codes), not a fake, and
// it installs from the Go module proxy:
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//
// (.ci/run does so where it is missing). The binary is looked up in PATH,
// then in $(go env GOPATH)/bin. When it is absent the test is skipped,
// unless TRACEBRIDGE_REQUIRE_SERVICES is set (as in CI): then it fails.
//
// Concurrency: each Start is a server of its own; parallel tests may start
// one each.
package objstoretest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/tlstest"
)

// Credentials of the servers Start runs.
const (
	AccessKey = "tracebridge-test"
	SecretKey = "tracebridge-test-secret"
)

// Version is the versitygw release the tests are written against.
const Version = "v1.8.0"

// Server is a running versitygw.
type Server struct {
	// Endpoint is its URL (http://127.0.0.1:PORT).
	Endpoint string
	// Dir is the posix directory it serves: bucket B's object K is the
	// file Dir/B/K.
	Dir string

	roots *x509.CertPool // with TLS: trusts the server's certificate
	bin   string
	args  []string // the command line after the binary
	tb    testing.TB

	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // the process's exit, once done is closed
}

// Binary returns the path of versitygw, skipping the test when it is not
// installed (failing it when TRACEBRIDGE_REQUIRE_SERVICES is set).
func Binary(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	var p string
	for _, dir := range filepath.SplitList(gopath) {
		p = filepath.Join(dir, "bin", "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p == "" {
		p = "versitygw"
	}
	// Skips, or fails under TRACEBRIDGE_REQUIRE_SERVICES.
	servicetest.RequireBinary(tb, p, "versitygw, the S3 server of the tests (go install github.com/versity/versitygw/cmd/versitygw@"+Version+")")
	return p
}

// Start runs a versitygw on a free loopback port, serving a temporary
// directory, and waits until it answers; it stops with the test.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return startServer(tb, false)
}

// StartTLS is Start with HTTPS, on a self-signed certificate
// (internal/tlstest) that clients do not trust unless told to.
func StartTLS(tb testing.TB) *Server {
	tb.Helper()
	return startServer(tb, true)
}

func startServer(tb testing.TB, withTLS bool) *Server {
	tb.Helper()
	bin := Binary(tb)
	dir := tb.TempDir()
	var args []string
	var roots *x509.CertPool
	if withTLS {
		cert := tlstest.New(tb)
		certFile, keyFile := cert.WriteFiles(tb, tb.TempDir())
		args = []string{"--cert", certFile, "--key", keyFile}
		roots = cert.Pool
	}
	var lastErr error
	for range 3 { // a port found free may be taken before the server binds it
		s, err := start(tb, bin, dir, args, roots)
		if err == nil {
			return s
		}
		lastErr = err
	}
	tb.Fatalf("versitygw: %v", lastErr)
	return nil
}

func start(tb testing.TB, bin, dir string, tlsArgs []string, roots *x509.CertPool) (*Server, error) {
	tb.Helper()
	port, err := servicetest.PickPort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	scheme := "http://"
	if roots != nil {
		scheme = "https://"
	}
	s := &Server{Endpoint: scheme + addr, Dir: dir, roots: roots, out: &syncBuffer{}, bin: bin, tb: tb}
	args := append([]string{"--access", AccessKey, "--secret", SecretKey, "--port", addr, "--quiet"}, tlsArgs...)
	s.args = append(args, "posix", dir)
	if err := s.run(); err != nil {
		return nil, err
	}
	tb.Cleanup(s.Stop)
	return s, nil
}

// run starts the process and waits until it answers.
func (s *Server) run() error {
	s.done = make(chan struct{})
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		return err
	}
	cmd, done := s.cmd, s.done
	go func() {
		s.err = cmd.Wait()
		close(done)
	}()
	if err := s.wait(60 * time.Second); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// Restart starts a stopped server again on the same address and
// directory (the buckets and objects it had are still there), as an S3
// endpoint that comes back after an outage; it fails tb when the server
// still runs or does not answer.
func (s *Server) Restart() {
	s.tb.Helper()
	select {
	case <-s.done:
	default:
		s.tb.Fatal("versitygw: Restart of a server that runs")
	}
	if err := s.run(); err != nil {
		s.tb.Fatalf("versitygw: restart on %s: %v", s.Endpoint, err)
	}
}

// wait polls until the server answers a signed request.
func (s *Server) wait(limit time.Duration) error {
	c, err := s.client(AccessKey, SecretKey)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.ListBuckets(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited before answering (%v): %s", s.err, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer on %s within %v: %v; output: %s", s.Endpoint, limit, err, s.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the server (safe to call twice).
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.done
}

// Output is what the server printed.
func (s *Server) Output() string { return s.out.String() }

func (s *Server) client(access, secret string) (*minio.Client, error) {
	host, secure := strings.CutPrefix(s.Endpoint, "https://")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: s.roots}
	tr.DisableKeepAlives = true // no idle connections left to the test's end
	return minio.New(strings.TrimPrefix(host, "http://"), &minio.Options{
		Secure:       secure,
		Transport:    tr,
		Creds:        credentials.NewStaticV4(access, secret, ""),
		Region:       objstore.DefaultRegion,
		BucketLookup: minio.BucketLookupPath,
	})
}

// Bucket creates a bucket (through the S3 API) and returns the
// configuration of a store in it under prefix, with the server's
// credentials in key files and short retry waits.
func (s *Server) Bucket(tb testing.TB, bucket, prefix string) objstore.S3Config {
	tb.Helper()
	c, err := s.client(AccessKey, SecretKey)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: objstore.DefaultRegion}); err != nil {
		tb.Fatalf("versitygw: make bucket %s: %v", bucket, err)
	}
	return s.Config(tb, bucket, prefix, AccessKey, SecretKey)
}

// IncompleteUploads lists the keys of a bucket's multipart uploads that
// were neither completed nor aborted.
func (s *Server) IncompleteUploads(tb testing.TB, bucket string) []string {
	tb.Helper()
	c, err := s.client(AccessKey, SecretKey)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	for u := range c.ListIncompleteUploads(ctx, bucket, "", true) {
		if u.Err != nil {
			tb.Fatalf("versitygw: list incomplete uploads of %s: %v", bucket, u.Err)
		}
		keys = append(keys, u.Key)
	}
	return keys
}

// Config returns the configuration of a store in an existing bucket with
// the given credentials (written to key files).
func (s *Server) Config(tb testing.TB, bucket, prefix, access, secret string) objstore.S3Config {
	tb.Helper()
	dir := tb.TempDir()
	ak, sk := filepath.Join(dir, "access"), filepath.Join(dir, "secret")
	if err := os.WriteFile(ak, []byte(access+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(sk, []byte(secret+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return objstore.S3Config{
		Endpoint:      s.Endpoint,
		Bucket:        bucket,
		Prefix:        prefix,
		AccessKeyFile: ak,
		SecretKeyFile: sk,
		RetryWait:     20 * time.Millisecond,
	}
}

// syncBuffer collects a process's output (bounded) for error messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() < 1<<20 {
		b.b.Write(p)
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
