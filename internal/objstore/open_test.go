package objstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/tracebridge/tracebridge/internal/objstore"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want objstore.Config
	}{
		{"s3://traces/prod/", objstore.Config{Backend: "s3", S3: objstore.S3Config{Bucket: "traces", Prefix: "prod/"}}},
		{"s3://traces/prod", objstore.Config{Backend: "s3", S3: objstore.S3Config{Bucket: "traces", Prefix: "prod/"}}},
		{"s3://traces/a/b/c", objstore.Config{Backend: "s3", S3: objstore.S3Config{Bucket: "traces", Prefix: "a/b/c/"}}},
		{"s3://traces", objstore.Config{Backend: "s3", S3: objstore.S3Config{Bucket: "traces"}}},
		{"s3://traces/", objstore.Config{Backend: "s3", S3: objstore.S3Config{Bucket: "traces"}}},
		{"file:///var/lib/tb", objstore.Config{Backend: "local", Path: "/var/lib/tb"}},
		{"file://localhost/var/lib/tb", objstore.Config{Backend: "local", Path: "/var/lib/tb"}},
		{"file:///a%20b", objstore.Config{Backend: "local", Path: "/a b"}},
		{"./tracebridge-data/store", objstore.Config{Backend: "local", Path: "./tracebridge-data/store"}},
		{"/abs/dir", objstore.Config{Backend: "local", Path: "/abs/dir"}},
		{"dir with: colon", objstore.Config{Backend: "local", Path: "dir with: colon"}},
	} {
		got, err := objstore.ParseURL(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", c.in, diff)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{"s3://", "no bucket"},
		{"s3:///prefix", "no bucket"},
		{"s3://Bad_Bucket/x", "bucket"},
		{"s3://b/x", "bucket"}, // too short
		{"s3://traces/a//b", "prefix"},
		{"s3://traces/../b", "prefix"},
		{"s3://traces:9000/x", "without a port"},
		{"s3://user@traces/x", "without a port"},
		{"s3://traces/x?versionId=1", "query"},
		{"gs://traces/x", `unknown scheme "gs"`},
		{"file://remote/x", "file:///absolute/dir"},
		{"file:relative", "file:///absolute/dir"},
		{"nul\x00dir", "NUL"},
	} {
		_, err := objstore.ParseURL(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error saying %q", c.in, err, c.want)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://traces/prod/", "s3://traces", "file:///var/lib/x", "file:///a%20b?c", "./dir", "s3://a.b-c/x y/ü", "gs://x", "", "s3:///", "file://h/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := objstore.ParseURL(s)
		if err != nil {
			return
		}
		if err := c.Validate(); c.Backend == objstore.BackendLocal && err != nil {
			t.Fatalf("%q parsed to %+v, which does not validate: %v", s, c, err)
		}
		// Round trip: the URL of what was parsed parses to the same.
		u := c.URL()
		c2, err := objstore.ParseURL(u)
		if err != nil {
			t.Fatalf("%q → %+v → %q: %v", s, c, u, err)
		}
		if diff := cmp.Diff(c, c2); diff != "" {
			t.Fatalf("%q → %q: differs (-first +second):\n%s", s, u, diff)
		}
	})
}

// The YAML a store sink embeds (issue 23's example).
func TestConfigYAML(t *testing.T) {
	const doc = `
backend: s3
s3:
  endpoint: "http://127.0.0.1:9000"
  bucket: traces
  prefix: prod/
  region: us-east-1
  insecure: true
  access_key_file: /run/secrets/ak
  secret_key_file: /run/secrets/sk
  max_attempts: 8
  retry_wait: 50ms
  timeout: 1m
  part_size: 8388608
`
	var c objstore.Config
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	want := objstore.Config{Backend: "s3", S3: objstore.S3Config{
		Endpoint: "http://127.0.0.1:9000", Bucket: "traces", Prefix: "prod/", Region: "us-east-1", Insecure: true,
		AccessKeyFile: "/run/secrets/ak", SecretKeyFile: "/run/secrets/sk",
		MaxAttempts: 8, RetryWait: 50 * time.Millisecond, Timeout: time.Minute, PartSize: 8 << 20,
	}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []objstore.Config{{Backend: "gcs"}, {Backend: "local"}, {}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validates", bad)
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	st, err := objstore.Open(objstore.Config{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := st.(*objstore.Local); !ok || l.Dir() != dir {
		t.Fatalf("Open of a path: %T %v", st, st)
	}
	if err := st.Put(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	st, err = objstore.Open(objstore.Config{Backend: "s3", S3: objstore.S3Config{Endpoint: "https://s3.example.com", Bucket: "traces"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*objstore.S3); !ok {
		t.Fatalf("Open of s3: %T", st)
	}
	if _, err := objstore.Open(objstore.Config{Backend: "s3"}); err == nil {
		t.Fatal("Open of s3 without an endpoint succeeded")
	}
}
