package objstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Backends.
const (
	BackendLocal = "local"
	BackendS3    = "s3"
)

// Config says where a store's bytes live: a directory (Backend "local",
// the default) or a bucket (Backend "s3"). Its YAML keys are the ones a
// store's configuration embeds: backend, path, s3.
type Config struct {
	Backend string   `yaml:"backend"`
	Path    string   `yaml:"path"`
	S3      S3Config `yaml:"s3"`
}

// Validate checks the configuration without touching the storage.
func (c *Config) Validate() error {
	switch c.Backend {
	case "", BackendLocal:
		if c.Path == "" {
			return errors.New("local store: no path")
		}
		return nil
	case BackendS3:
		return c.S3.Validate()
	}
	return fmt.Errorf("store backend %q: want %q or %q", c.Backend, BackendLocal, BackendS3)
}

// Open returns the store of cfg: NewLocal or NewS3.
func Open(cfg Config) (Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Backend == BackendS3 {
		return NewS3(cfg.S3)
	}
	return NewLocal(cfg.Path)
}

// ParseURL reads a store's location as the command line gives it:
// "s3://bucket/prefix" (the endpoint and the rest of S3Config come from
// elsewhere: --s3-endpoint, the environment), "file:///abs/dir", or a plain
// directory path. An S3 prefix gets a trailing slash.
func ParseURL(s string) (Config, error) {
	switch {
	case s == "":
		return Config{}, errors.New("store location: empty")
	case strings.HasPrefix(s, "s3://"):
		rest := s[len("s3://"):]
		bucket, prefix, _ := strings.Cut(rest, "/")
		if strings.ContainsAny(bucket, "?#@:") || strings.ContainsAny(prefix, "?#") {
			return Config{}, fmt.Errorf("store location %q: want s3://bucket/prefix, without a port, user, query or fragment", s)
		}
		c := Config{Backend: BackendS3, S3: S3Config{Bucket: bucket, Prefix: prefix}}
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			c.S3.Prefix += "/"
		}
		if bucket == "" {
			return Config{}, fmt.Errorf("store location %q: no bucket", s)
		}
		if err := checkBucket(bucket); err != nil {
			return Config{}, fmt.Errorf("store location %q: bucket: %v", s, err)
		}
		if prefix != "" {
			if err := validPath(strings.TrimSuffix(prefix, "/")); err != nil {
				return Config{}, fmt.Errorf("store location %q: prefix: %v", s, err)
			}
		}
		return c, nil
	case strings.HasPrefix(s, "file:"):
		u, err := url.Parse(s)
		if err != nil {
			return Config{}, fmt.Errorf("store location %q: %v", s, err)
		}
		if u.Host != "" && u.Host != "localhost" || u.Path == "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return Config{}, fmt.Errorf("store location %q: want file:///absolute/dir", s)
		}
		return Config{Backend: BackendLocal, Path: u.Path}, nil
	case strings.Contains(s, "://"):
		scheme, _, _ := strings.Cut(s, "://")
		return Config{}, fmt.Errorf("store location %q: unknown scheme %q (want s3:// or file://, or a directory)", s, scheme)
	case strings.ContainsRune(s, 0):
		return Config{}, fmt.Errorf("store location %q: NUL in the path", s)
	}
	return Config{Backend: BackendLocal, Path: s}, nil
}

// URL is the inverse of ParseURL: the location as the command line writes
// it (an S3 store's endpoint is not part of it).
func (c *Config) URL() string {
	if c.Backend == BackendS3 {
		return "s3://" + c.S3.Bucket + "/" + c.S3.Prefix
	}
	if strings.HasPrefix(c.Path, "/") {
		return (&url.URL{Scheme: "file", Path: c.Path}).String()
	}
	return c.Path
}

func checkBucket(b string) error { return s3utils.CheckValidBucketNameStrict(b) }
