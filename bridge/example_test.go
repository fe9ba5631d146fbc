package bridge_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/tracebridge/tracebridge/bridge"
)

// Embedding the bridge, as KDB's ServiceContainer allowed: a KDB binary TCP
// receiver and a Kieker log sink built from code, a listener called every
// 100 records, and a stop by cancelling the context.
func Example() {
	receiver, err := bridge.NewKDBReceiver(bridge.TCPReceiverConfig{Address: "127.0.0.1:0"}, "", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "bridge-example-")
	defer os.RemoveAll(dir)
	log, err := bridge.NewKiekerLog(bridge.KiekerLogConfig{Path: dir, Binary: true, Metadata: true})
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

	// A client sends 250 Before events in the KDB binary dialect
	// (default mapping: id 1 is BeforeOperationEvent).
	conn, _ := net.Dial("tcp", receiver.Addr().String())
	for i := range 250 {
		conn.Write(kdbBefore(int64(i), 42, int32(i), "void work()", "example.Worker"))
	}
	conn.Close()
	for b.Stats().Records < 250 { // until they went through
		time.Sleep(10 * time.Millisecond)
	}

	stop() // drains, flushes and closes the log
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	fmt.Println("records handed to the sinks:", b.Stats().Records)
	fmt.Println("records in the log (with its metadata record):", log.Records())
	// Output:
	// received 100 records
	// received 200 records
	// records handed to the sinks: 250
	// records in the log (with its metadata record): 251
}

// kdbBefore encodes a BeforeOperationEvent in the KDB binary dialect:
// int32 id, then the fields big-endian, strings as int32 length + UTF-8.
func kdbBefore(ts, trace int64, order int32, op, cls string) []byte {
	b := []byte{0, 0, 0, 1}
	b = appendInt64(b, ts)
	b = appendInt64(b, trace)
	b = appendInt32(b, order)
	for _, s := range []string{op, cls} {
		b = appendInt32(b, int32(len(s)))
		b = append(b, s...)
	}
	return b
}

func appendInt64(b []byte, v int64) []byte {
	return append(b, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func appendInt32(b []byte, v int32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
