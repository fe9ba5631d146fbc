package bridge_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridge"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/sink/kiekerlog"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/source/tcp"
)

// Embedding the bridge, as KDB's ServiceContainer allowed: a KDB binary TCP
// receiver and a Kieker log sink built from code, a listener called every
// 100 records, and a stop by cancelling the context.
func Example() {
	cat := record.Builtin()
	mapping, _ := kdb.DefaultMapping(cat)

	receiver, err := tcp.New(tcp.Config{
		Mode:       tcp.Server,
		Address:    "127.0.0.1:0",
		NewDecoder: tcp.KDBDecoder(mapping, kdb.Options{}),
	}, tcp.Settings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "bridge-example-")
	defer os.RemoveAll(dir)
	log, err := kiekerlog.New(kiekerlog.Config{Path: dir, Binary: true, Metadata: true})
	if err != nil {
		fmt.Println(err)
		return
	}

	b := bridge.New(bridge.Settings{
		Listener: func(count int64, msg string) {
			if msg == "" {
				fmt.Printf("received %d records\n", count)
			}
		},
	})
	b.SetListenerUpdateInterval(100) // the default, as in KDB
	b.AddSource("kdb", receiver)
	b.AddSink("log", log)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Run(ctx) }()

	// A client sends 250 Before events in the KDB binary dialect.
	conn, _ := net.Dial("tcp", receiver.Addr().String())
	before := cat.Lookup(record.BeforeOperationEvent)
	var batch record.Batch
	var wire []byte
	for i := range 250 {
		r := batch.Add(before, record.NoTimestamp)
		r.Values[0] = record.IntValue(int64(i))
		r.Values[1] = record.IntValue(42)
		r.Values[2] = record.IntValue(int64(i))
		r.Values[3] = record.StringValue("void work()")
		r.Values[4] = record.StringValue("example.Worker")
		id, _ := mapping.ID(before)
		wire, _ = kdb.AppendBinary(wire, id, r)
	}
	conn.Write(wire)
	conn.Close()
	time.Sleep(200 * time.Millisecond)

	stop() // drains, flushes and closes the log
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	fmt.Println("records handed to the sinks:", b.Stats().Records)

	// Read the log back.
	r, _ := srclog.Open(log.Dir(), srclog.Options{})
	n := 0
	r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		n += b.Len()
		return nil
	}))
	fmt.Println("records in the log (with its metadata record):", n)
	// Output:
	// received 100 records
	// received 200 records
	// records handed to the sinks: 250
	// records in the log (with its metadata record): 251
}
