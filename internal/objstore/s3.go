package objstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/tracebridge/tracebridge/internal/backoff"
)

// S3Config says which bucket of which S3-compatible server holds a store
// (AWS S3, MinIO, Ceph, SeaweedFS, Versity, …). Objects are addressed
// path-style (http://host/bucket/key), which every one of them serves.
type S3Config struct {
	// Endpoint is the server's URL; its scheme decides TLS
	// ("http://127.0.0.1:9000", "https://s3.eu-west-1.amazonaws.com").
	Endpoint string `yaml:"endpoint"`
	Bucket   string `yaml:"bucket"`
	// Prefix is put before every key ("prod/"); a prefix without a
	// trailing slash gets one.
	Prefix string `yaml:"prefix"`
	// Region signs the requests (default us-east-1).
	Region string `yaml:"region"`
	// Insecure skips the verification of the server's TLS certificate.
	Insecure bool `yaml:"insecure"`
	// AccessKeyFile and SecretKeyFile hold the credentials (surrounding
	// white space is ignored); without them the standard
	// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN)
	// variables are used, and without those the requests are anonymous.
	AccessKeyFile string `yaml:"access_key_file"`
	SecretKeyFile string `yaml:"secret_key_file"`
	// MaxAttempts bounds the tries of one operation (default 6) when the
	// server answers 5xx or is throttling, slow or unreachable; RetryWait
	// is the first wait between them (default 200ms), doubling up to 32
	// times that, capped at 10s.
	MaxAttempts int           `yaml:"max_attempts"`
	RetryWait   time.Duration `yaml:"retry_wait"`
	// Timeout bounds the wait for an answer's headers once a request is
	// sent (default 30s); a slower answer counts as a failed attempt.
	Timeout time.Duration `yaml:"timeout"`
	// PartSize: objects larger than this are uploaded in parts of this
	// size (default 16MiB, at least 5MiB).
	PartSize int64 `yaml:"part_size"`
}

// Defaults of S3Config.
const (
	DefaultRegion      = "us-east-1"
	DefaultMaxAttempts = 6
	DefaultRetryWait   = 200 * time.Millisecond
	DefaultTimeout     = 30 * time.Second
	DefaultPartSize    = 16 << 20
	minPartSize        = 5 << 20
	maxRetryWait       = 10 * time.Second
)

// Validate checks the configuration without contacting the server.
func (c *S3Config) Validate() error {
	if _, _, err := c.endpoint(); err != nil {
		return err
	}
	if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		return fmt.Errorf("s3 bucket %q: %v", c.Bucket, err)
	}
	if c.Prefix != "" {
		if err := validPath(strings.TrimSuffix(c.Prefix, "/")); err != nil {
			return fmt.Errorf("s3 prefix %q: %v", c.Prefix, err)
		}
	}
	if (c.AccessKeyFile == "") != (c.SecretKeyFile == "") {
		return errors.New("s3: access_key_file and secret_key_file go together")
	}
	switch {
	case c.MaxAttempts < 0:
		return fmt.Errorf("s3 max_attempts %d is negative", c.MaxAttempts)
	case c.RetryWait < 0:
		return fmt.Errorf("s3 retry_wait %v is negative", c.RetryWait)
	case c.Timeout < 0:
		return fmt.Errorf("s3 timeout %v is negative", c.Timeout)
	case c.PartSize != 0 && c.PartSize < minPartSize:
		return fmt.Errorf("s3 part_size %d is below the minimum of 5MiB", c.PartSize)
	}
	return nil
}

// endpoint returns the server's host:port and whether it speaks TLS.
func (c *S3Config) endpoint() (host string, secure bool, err error) {
	if c.Endpoint == "" {
		return "", false, errors.New("s3: no endpoint (the server's URL, e.g. http://127.0.0.1:9000)")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return "", false, fmt.Errorf("s3 endpoint %q: %v", c.Endpoint, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", false, fmt.Errorf("s3 endpoint %q: the scheme must be http or https", c.Endpoint)
	case u.Host == "":
		return "", false, fmt.Errorf("s3 endpoint %q: no host", c.Endpoint)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.User != nil:
		return "", false, fmt.Errorf("s3 endpoint %q: only scheme://host[:port], without a path, query or user", c.Endpoint)
	}
	return u.Host, u.Scheme == "https", nil
}

// S3 keeps objects in a bucket of an S3-compatible server.
type S3 struct {
	client   *minio.Client
	tr       *http.Transport
	bucket   string
	prefix   string
	name     string // "s3 http://host:port/bucket/prefix"
	attempts int
	wait     time.Duration
	partSize uint64
}

var _ Store = (*S3)(nil)

// NewS3 returns the store of cfg; it reads the credentials but does not
// contact the server (the first operation does).
func NewS3(cfg S3Config) (*S3, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, secure, _ := cfg.endpoint()
	prefix := cfg.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	s := &S3{
		bucket:   cfg.Bucket,
		prefix:   prefix,
		name:     "s3 " + strings.TrimSuffix(cfg.Endpoint, "/") + "/" + cfg.Bucket + "/" + prefix,
		attempts: cfg.MaxAttempts,
		wait:     cfg.RetryWait,
		partSize: uint64(cfg.PartSize),
	}
	s.name = strings.TrimSuffix(s.name, "/")
	if s.attempts == 0 {
		s.attempts = DefaultMaxAttempts
	}
	if s.wait == 0 {
		s.wait = DefaultRetryWait
	}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	creds, err := cfg.credentials()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: min(timeout, 10*time.Second), KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = timeout
	tr.TLSHandshakeTimeout = min(timeout, 10*time.Second)
	tr.MaxIdleConnsPerHost = 16
	tr.DisableCompression = true
	if cfg.Insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for by the configuration
	}
	region := cfg.Region
	if region == "" {
		region = DefaultRegion
	}
	s.tr = tr
	s.client, err = minio.New(host, &minio.Options{
		Creds:        creds,
		Secure:       secure,
		Transport:    tr,
		Region:       region,
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1, // this package retries, with its own bounds
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return s, nil
}

// credentials reads the key files, else the environment.
func (c *S3Config) credentials() (*credentials.Credentials, error) {
	if c.AccessKeyFile != "" {
		ak, err := os.ReadFile(c.AccessKeyFile)
		if err != nil {
			return nil, fmt.Errorf("access_key_file: %w", err)
		}
		sk, err := os.ReadFile(c.SecretKeyFile)
		if err != nil {
			return nil, fmt.Errorf("secret_key_file: %w", err)
		}
		a, s := strings.TrimSpace(string(ak)), strings.TrimSpace(string(sk))
		if a == "" || s == "" {
			return nil, fmt.Errorf("access_key_file %s or secret_key_file %s is empty", c.AccessKeyFile, c.SecretKeyFile)
		}
		return credentials.NewStaticV4(a, s, ""), nil
	}
	a, s := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if a == "" && s == "" {
		return credentials.NewStaticV4("", "", ""), nil // anonymous
	}
	if a == "" || s == "" {
		return nil, errors.New("only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set")
	}
	return credentials.NewStaticV4(a, s, os.Getenv("AWS_SESSION_TOKEN")), nil
}

func (s *S3) String() string { return s.name }

// Close implements Store: it closes the idle connections.
func (s *S3) Close() error {
	s.tr.CloseIdleConnections()
	return nil
}

func (s *S3) fail(op, key string, err error) error {
	return &Error{Backend: s.name, Op: op, Key: key, Err: err}
}

// retry runs f until it succeeds, fails for good, or the attempts or ctx
// run out, and returns the reason (wrapped by the caller).
func (s *S3) retry(ctx context.Context, f func() error) error {
	b := backoff.Exponential{Min: s.wait, Max: min(32*s.wait, maxRetryWait)}
	for attempt := 1; ; attempt++ {
		err := ctx.Err()
		if err == nil {
			err = f()
		}
		if err == nil {
			return nil
		}
		r, again := classify(ctx, err)
		if !again {
			return r
		}
		if attempt >= s.attempts {
			r.msg = fmt.Sprintf("%s after %d attempts", r.msg, attempt)
			return r
		}
		if !backoff.Sleep(ctx, b.Next()) {
			return &reason{msg: fmt.Sprintf("gave up after %d attempts (%v); last", attempt, context.Cause(ctx)), kind: r.kind, cause: err}
		}
	}
}

// classify says why an S3 call failed and whether trying again may help.
func classify(ctx context.Context, err error) (*reason, bool) {
	if ctx.Err() != nil {
		return &reason{msg: "cancelled", cause: err}, false
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) && (er.StatusCode != 0 || er.Code != "") {
		switch er.Code {
		case "NoSuchKey":
			return &reason{msg: "not found", kind: ErrNotExist}, false
		case "InvalidAccessKeyId", "XAdminUserNotFound", "SignatureDoesNotMatch", "AuthorizationHeaderMalformed", "InvalidToken", "ExpiredToken", "TokenRefreshRequired":
			// (Versity answers an unknown access key with XAdminUserNotFound.)
			return &reason{msg: "wrong credentials", kind: ErrDenied, cause: err}, false
		case "AccessDenied", "AllAccessDisabled", "AccountProblem":
			return &reason{msg: "access denied", kind: ErrDenied, cause: err}, false
		case "NoSuchBucket":
			return &reason{msg: "the bucket does not exist", cause: err}, false
		case "InvalidRange":
			return &reason{msg: "range past the end of the object", kind: ErrRange, cause: err}, false
		case "SlowDown", "SlowDownRead", "SlowDownWrite", "Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled", "RequestTimeout", "InternalError", "ServiceUnavailable":
			return &reason{msg: "server busy or failing", cause: err}, true
		}
		switch st := er.StatusCode; {
		case st == http.StatusNotFound:
			return &reason{msg: "not found", kind: ErrNotExist, cause: err}, false
		case st == http.StatusForbidden:
			return &reason{msg: "access denied", kind: ErrDenied, cause: err}, false
		case st == http.StatusRequestedRangeNotSatisfiable:
			return &reason{msg: "range past the end of the object", kind: ErrRange, cause: err}, false
		case st == http.StatusRequestTimeout || st == http.StatusTooManyRequests || st >= 500:
			return &reason{msg: fmt.Sprintf("server error %d %s", st, http.StatusText(st)), cause: err}, true
		}
		return &reason{msg: "refused", cause: err}, false
	}
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return &reason{msg: "server unreachable", cause: err}, true
	case errors.As(err, &ne) && ne.Timeout():
		return &reason{msg: "server too slow", cause: err}, true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &reason{msg: "connection lost", cause: err}, true
	case errors.As(err, &ue):
		var cert *tls.CertificateVerificationError
		if errors.As(err, &cert) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
			return &reason{msg: "TLS failed", cause: err}, false
		}
		return &reason{msg: "request failed", cause: err}, true
	case errors.As(err, &ne):
		return &reason{msg: "network error", cause: err}, true
	}
	return &reason{msg: "failed", cause: err}, false
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ValidKey(key); err != nil {
		return nil, s.fail("get", key, err)
	}
	var data []byte
	err := s.retry(ctx, func() error {
		var err error
		data, err = s.read(ctx, key, minio.GetObjectOptions{}, 0, -1)
		return err
	})
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	return data, nil
}

// read gets an object (or a range of want bytes, want ≥ 0) in one request.
func (s *S3) read(ctx context.Context, key string, opts minio.GetObjectOptions, off, want int64) ([]byte, error) {
	core := minio.Core{Client: s.client}
	body, info, h, err := core.GetObject(ctx, s.bucket, s.prefix+key, opts)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if want >= 0 && off > 0 {
		// A server that ignores the range would send the object from its
		// first byte.
		var first int64
		if _, err := fmt.Sscanf(h.Get("Content-Range"), "bytes %d-", &first); err != nil || first != off {
			return nil, errIgnoredRange{h.Get("Content-Range"), off}
		}
	}
	if want < 0 && info.Size < 0 { // no length announced
		return io.ReadAll(body)
	}
	size := info.Size
	if want >= 0 {
		size = want
	}
	buf := make([]byte, size)
	n, err := io.ReadFull(body, buf)
	if want >= 0 && int64(n) < want && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) && info.Size >= 0 && int64(n) == info.Size {
		// The server sent the whole (shorter) part of the range it had.
		return nil, minio.ErrorResponse{Code: "InvalidRange", StatusCode: http.StatusRequestedRangeNotSatisfiable, Message: fmt.Sprintf("%d of %d bytes", n, want)}
	}
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// errIgnoredRange: the server answered a range request with other bytes.
type errIgnoredRange struct {
	contentRange string
	off          int64
}

func (e errIgnoredRange) Error() string {
	return fmt.Sprintf("the server answered a range from byte %d with Content-Range %q", e.off, e.contentRange)
}

// GetRange implements Store.
func (s *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ValidKey(key); err != nil {
		return nil, s.fail("get range", key, err)
	}
	if err := checkRange(off, n); err != nil {
		return nil, s.fail("get range", key, err)
	}
	if n == 0 {
		return []byte{}, nil
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+n-1); err != nil {
		return nil, s.fail("get range", key, err)
	}
	var data []byte
	err := s.retry(ctx, func() error {
		var err error
		data, err = s.read(ctx, key, opts, off, n)
		return err
	})
	if err != nil {
		var r *reason
		if errors.As(err, &r) && r.kind == ErrRange {
			err = &reason{msg: fmt.Sprintf("range of %d bytes at offset %d past the end of the object", n, off), kind: ErrRange, cause: r.cause}
		}
		return nil, s.fail("get range", key, err)
	}
	return data, nil
}

// Put implements Store: one PUT, or a multipart upload above PartSize,
// its parts one after the other; an upload that fails is aborted before
// the next attempt. (An upload cut short by a crash stays on the server
// until the bucket's lifecycle rule AbortIncompleteMultipartUpload, if
// any, removes it.)
func (s *S3) Put(ctx context.Context, key string, data ...[]byte) error {
	if err := ValidKey(key); err != nil {
		return s.fail("put", key, err)
	}
	err := s.retry(ctx, func() error {
		// minio-go leaves its part workers waiting on the context after a
		// failed part: end them with the attempt.
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := newPartsReader(data)
		_, err := s.client.PutObject(actx, s.bucket, s.prefix+key, r, r.size, minio.PutObjectOptions{
			ContentType: "application/octet-stream",
			PartSize:    s.partSize,
			// One part at a time: when a part fails, the upload is
			// aborted with no other part in flight, so nothing of it is
			// left on the server (parallel parts could land after the
			// abort and leave an incomplete upload taking space).
			NumThreads: 1,
		})
		return err
	})
	if err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return s.fail("delete", key, err)
	}
	err := s.retry(ctx, func() error {
		return s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
	})
	if err != nil && !errors.Is(err, ErrNotExist) {
		return s.fail("delete", key, err)
	}
	return nil
}

// List implements Store. The server pages the listing; a page that fails
// is asked for again (from the last key received) within the attempts.
func (s *S3) List(ctx context.Context, prefix string) ([]Object, error) {
	if !utf8.ValidString(prefix) || strings.ContainsRune(prefix, 0) || strings.HasPrefix(prefix, "/") {
		return nil, s.fail("list", prefix, &reason{msg: "bad prefix", kind: ErrKey})
	}
	var objs []Object
	after := ""
	err := s.retry(ctx, func() error {
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		opts := minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true, StartAfter: after}
		for o := range s.client.ListObjectsIter(lctx, s.bucket, opts) {
			if o.Err != nil {
				return o.Err
			}
			after = o.Key
			key := strings.TrimPrefix(o.Key, s.prefix)
			if validPath(key) != nil { // not written by a Store (a folder marker, …)
				continue
			}
			objs = append(objs, Object{Key: key, Size: o.Size, Modified: o.LastModified})
		}
		return ctx.Err() // a listing cut short by ctx ends without an error
	})
	if err != nil {
		return nil, s.fail("list", prefix, err)
	}
	// Servers list in key order; say so for those that do not.
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return objs, nil
}
