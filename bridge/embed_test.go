package bridge_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestEmbedFromAnotherModule builds and runs a program in a module of its
// own that embeds the bridge through this package only: the API is usable
// from outside tracebridge (internal packages would not be).
func TestEmbedFromAnotherModule(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(here))
	dir := t.TempDir()
	goMod := "module example.com/embedder\n\ngo 1.26\n\nrequire github.com/tracebridge/tracebridge v0.0.0\n\nreplace github.com/tracebridge/tracebridge => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", goMod)
	write("go.sum", string(sum))
	write("main.go", `package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/tracebridge/tracebridge/bridge"
)

func main() {
	r, err := bridge.NewKiekerReceiver(bridge.TCPReceiverConfig{Address: "127.0.0.1:0"}, nil)
	if err != nil {
		panic(err)
	}
	w, err := bridge.NewKiekerLog(bridge.KiekerLogConfig{Path: os.Args[1], Metadata: true})
	if err != nil {
		panic(err)
	}
	var seen int64
	b := bridge.New(bridge.Settings{Listener: func(n int64, msg string) {
		if msg == "" {
			seen = n
		}
	}, ListenerInterval: 10})
	b.AddSource("kieker", r)
	b.AddStage(func(next bridge.Consumer) bridge.Consumer {
		return bridge.ConsumerFunc(func(ctx context.Context, batch *bridge.Batch) error {
			return next.Consume(ctx, batch) // a stage written outside tracebridge
		})
	})
	b.AddSink("log", w)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Run(ctx) }()
	stream, err := os.ReadFile(os.Args[2])
	if err != nil {
		panic(err)
	}
	c, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		panic(err)
	}
	c.Write(stream)
	c.Close()
	// Until the records went through (stopping drains only what the
	// receiver has taken), a minute at most.
	for t0 := time.Now(); b.Stats().Records < 404 && time.Since(t0) < time.Minute; {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		panic(err)
	}
	fmt.Println(b.Stats().Records, seen)
}
`)
	cmd := exec.Command("go", "run", ".", t.TempDir(), sharedStream(t))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "404 400" {
		t.Fatalf("embedding program printed %q, want \"404 400\" (records, last listener count)", got)
	}
}
