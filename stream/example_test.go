package stream_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	sink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/stream"
)

// A bridge publishes what it receives; a subscriber follows it. Here the
// bridge is the stream sink of this process (a running `tracebridge
// serve` has it on nats://127.0.0.1:14222).
func Example() {
	dir, _ := os.MkdirTemp("", "stream-example")
	defer os.RemoveAll(dir)
	bridge, err := sink.New(&sink.Config{Listen: "127.0.0.1:0"}, pipeline.Settings{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer bridge.Close()

	// On the bridge's machine its data directory holds the credential of
	// its NATS server (elsewhere: Options.CredsFile).
	s, err := stream.Open(bridge.URL(), stream.Options{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ready := make(chan struct{})
	s.OnMetadata(func(m *stream.Metadata) {
		fmt.Println("metadata:", len(m.Types), "types")
		if len(m.Types) == 0 {
			close(ready)
		}
	})
	s.OnEvent("BeforeOperationEvent", func(e *stream.Event) {
		sig, _ := e.Field("operationSignature")
		fmt.Println(e.Host, e.Type.ShortName(), sig.Str())
		cancel() // one is enough
	})
	go func() {
		<-ready
		b := &record.Batch{Origin: record.Origin{Host: "shop-1"}}
		r := b.Add(record.Builtin().Lookup(record.BeforeOperationEvent), -1)
		r.Values[3] = record.StringValue("public void shop.Cart.add(int)")
		bridge.Consume(context.Background(), b)
	}()
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// metadata: 0 types
	// metadata: 1 types
	// shop-1 BeforeOperationEvent public void shop.Cart.add(int)
}
