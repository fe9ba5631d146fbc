package jfr

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// originCollector keeps each batch's origin and size.
type originCollector struct {
	mu      sync.Mutex
	origins map[record.Origin]int
}

func (c *originCollector) Consume(_ context.Context, b *record.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.origins == nil {
		c.origins = map[record.Origin]int{}
	}
	c.origins[b.Origin] += b.Len()
	return nil
}

// TestOrigin: every batch holds the records of one JVM directory and
// says which (peer the directory, session its pid, host the configured
// one); a recording file names itself.
func TestOrigin(t *testing.T) {
	_, path := rec.Get(t)
	root := t.TempDir()
	a := filepath.Join(root, "2026_01_02_03_04_05_4242")
	b := filepath.Join(root, "2026_01_02_03_04_09_77")
	for _, d := range []string{a, b} {
		os.Mkdir(d, 0o755)
		splitChunks(t, path, d)
	}
	whole, _, _ := readAll(t, Config{Path: path})
	n := len(whole.records)
	for _, follow := range []bool{false, true} {
		var c originCollector
		src, stop := runSource(t, Config{Path: root, Host: "box", Follow: follow, Start: StartBeginning, BatchSize: 333, PollInterval: 20 * time.Millisecond}, &c)
		deadline := time.Now().Add(30 * time.Second)
		for src.Stats().Records < int64(2*n) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		stop()
		want := map[record.Origin]int{
			{Peer: a, Host: "box", Session: "4242"}: n,
			{Peer: b, Host: "box", Session: "77"}:   n,
		}
		if len(c.origins) != 2 || c.origins[record.Origin{Peer: a, Host: "box", Session: "4242"}] != n || c.origins[record.Origin{Peer: b, Host: "box", Session: "77"}] != n {
			t.Errorf("follow=%v: origins %v, want %v", follow, c.origins, want)
		}
	}
	var c originCollector
	src, _ := New(Config{Path: path}, Settings{})
	if err := src.Run(context.Background(), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.origins) != 1 || c.origins[record.Origin{Peer: path}] != n {
		t.Errorf("file: origins %v", c.origins)
	}
}

func TestDetect(t *testing.T) {
	_, path := rec.Get(t)
	root := t.TempDir()
	jvm := filepath.Join(root, "2026_01_02_03_04_05_4242")
	os.Mkdir(jvm, 0o755)
	splitChunks(t, path, jvm)
	empty := t.TempDir()
	other := filepath.Join(t.TempDir(), "x.jfr")
	os.WriteFile(other, []byte("not JFR"), 0o644)
	kieker := filepath.Join(t.TempDir(), "kieker-log")
	os.MkdirAll(kieker, 0o755)
	os.WriteFile(filepath.Join(kieker, "kieker.map"), []byte("$0=a.B\n"), 0o644)
	for p, want := range map[string]bool{path: true, root: true, jvm: true, empty: false, other: false, kieker: false, filepath.Join(root, "none"): false} {
		if got := Detect(p); got != want {
			t.Errorf("Detect(%s) = %v, want %v", p, got, want)
		}
	}
}

func TestFactoryConfig(t *testing.T) {
	f := Factory()
	for _, tt := range []struct {
		cfg  FactoryConfig
		want string
	}{
		{FactoryConfig{}, "repository missing"},
		{FactoryConfig{Repository: "/r", Start: "middle"}, "start"},
		{FactoryConfig{Repository: "/r", Types: []string{"[x"}}, "invalid jfr configuration"},
		{FactoryConfig{Repository: "/r", PollInterval: -1}, "negative"},
		{FactoryConfig{Repository: "/r", Start: "beginning", Types: []string{"jdk.*"}}, ""},
	} {
		err := tt.cfg.Validate()
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.want)
		}
	}
	if f.Type() != Type {
		t.Fatal(f.Type())
	}
	rc, err := f.NewReceiver(&FactoryConfig{Repository: t.TempDir()}, pipeline.Settings{Name: "jvms"})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if !strings.Contains(rc.Where(), "following the JFR repository") {
		t.Errorf("Where %q", rc.Where())
	}
	if host, _ := os.Hostname(); rc.(*receiver).cfg.Host != host {
		t.Errorf("host %q, want the machine's %q", rc.(*receiver).cfg.Host, host)
	}
}
