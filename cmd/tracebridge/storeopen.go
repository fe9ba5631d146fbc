package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/store"
)

// storeLocation is the flags that name a trace store: --store (a
// directory, file:///DIR or s3://bucket/prefix) and, for S3, the
// server's endpoint and how to reach it (credentials from
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the key files).
type storeLocation struct {
	loc, endpoint, region, accessFile, secretFile, wal string
	insecure                                           bool
}

// addStoreFlags adds --store (default def) and the --s3-… flags to fs.
func addStoreFlags(fs *flag.FlagSet, def, what string) *storeLocation {
	l := &storeLocation{}
	fs.StringVar(&l.loc, "store", def, what+": a directory, or s3://BUCKET/PREFIX with --s3-endpoint")
	fs.StringVar(&l.endpoint, "s3-endpoint", "", "with --store s3://…: the S3 server (http://HOST:PORT; https for TLS)")
	fs.StringVar(&l.region, "s3-region", "", "with --store s3://…: the region (default us-east-1)")
	fs.BoolVar(&l.insecure, "s3-insecure", false, "with --store s3://…: skip the TLS certificate check")
	fs.StringVar(&l.accessFile, "s3-access-key-file", "", "with --store s3://…: a file holding the access key (else AWS_ACCESS_KEY_ID)")
	fs.StringVar(&l.secretFile, "s3-secret-key-file", "", "with --store s3://…: a file holding the secret key (else AWS_SECRET_ACCESS_KEY)")
	fs.StringVar(&l.wal, "wal", "", "with --store s3://…: the writer's store directory on this machine, to see its write-ahead too")
	return l
}

// isS3 reports whether the location is a bucket.
func (l *storeLocation) isS3() bool {
	cfg, err := objstore.ParseURL(l.loc)
	return err == nil && cfg.Backend == objstore.BackendS3
}

// dir returns the local directory of the store ("" for a bucket without
// --wal).
func (l *storeLocation) dir() string {
	if l.isS3() {
		return l.wal
	}
	cfg, err := objstore.ParseURL(l.loc)
	if err != nil {
		return l.loc
	}
	return cfg.Path
}

// open opens the store read-only or to write; close releases it.
func (l *storeLocation) open(o store.Options) (s *store.Store, closeFn func(), err error) {
	dir, o2, cleanup, err := l.resolve()
	if err != nil {
		return nil, nil, err
	}
	o.Bucket = o2.Bucket
	s, err = store.Open(dir, o)
	if err != nil {
		cleanup()
		return nil, nil, withCode(exitConfig, err)
	}
	return s, func() { s.Close(); cleanup() }, nil
}

// resolve returns the store's local directory and the options that name
// its bucket (none for a directory); cleanup removes what it made.
func (l *storeLocation) resolve() (dir string, o store.Options, cleanup func(), err error) {
	cfg, err := objstore.ParseURL(l.loc)
	if err != nil {
		return "", o, nil, usagef("--store %q: %v", l.loc, err)
	}
	dir = cfg.Path
	cleanup = func() {}
	if cfg.Backend == objstore.BackendS3 {
		cfg.S3.Endpoint, cfg.S3.Region, cfg.S3.Insecure = l.endpoint, l.region, l.insecure
		cfg.S3.AccessKeyFile, cfg.S3.SecretKeyFile = l.accessFile, l.secretFile
		if cfg.S3.Endpoint == "" {
			return "", o, nil, usagef("--store %s needs --s3-endpoint URL", l.loc)
		}
		b, err := objstore.NewS3(cfg.S3)
		if err != nil {
			return "", o, nil, withCode(exitConfig, err)
		}
		o.Bucket = b
		dir = l.wal
		if dir == "" {
			// No write-ahead of a writer to read: a directory of none.
			if dir, err = os.MkdirTemp("", "tracebridge-store-"); err != nil {
				return "", o, nil, err
			}
			tmp := dir
			cleanup = func() { os.RemoveAll(tmp) }
		}
	} else if !exists(dir) {
		return "", o, nil, withCode(exitConfig, fmt.Errorf("store %s: %w", dir, os.ErrNotExist))
	}
	return dir, o, cleanup, nil
}

// storeExists reports whether a directory holds a trace store (of
// either version).
func storeExists(dir string) bool {
	for _, sub := range []string{"wal", "blocks", "index"} {
		if exists(filepath.Join(dir, sub)) {
			return true
		}
	}
	return false
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
