package zico_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/source/zico"
)

// TestSessionChunking: a session gets the same traces, and its peer the
// same replies, however the bytes of the frames are cut into reads.
func TestSessionChunking(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	p := zicotest.NewPayload(zicotest.NewRegistry())
	stream := codec.AppendFrame(nil, codec.Hello, helloPayload("h1", "pw"))
	frames := 1
	for range 6 {
		r := zicotest.Generate(rng, 1+rng.IntN(200), clock)
		stream = codec.AppendFrame(stream, codec.Data, p.Append(nil, &r))
		frames++
	}
	stream = codec.AppendFrame(stream, codec.Ping, nil)
	frames++

	run := func(cuts func(rest int) int) ([]batch, []codec.Type) {
		h := &recorder{}
		srvConn, cliConn := net.Pipe()
		sess := zico.NewSession(srvConn, h, zico.Config{})
		done := make(chan error, 1)
		go func() { done <- sess.Serve(context.Background()) }()
		replies := make(chan []codec.Type, 1)
		go func() {
			fr := codec.NewFrameReader(cliConn, 0)
			var got []codec.Type
			for range frames {
				f, err := fr.Next()
				if err != nil {
					break
				}
				got = append(got, f.Type)
			}
			replies <- got
		}()
		for rest := stream; len(rest) > 0; {
			n := min(len(rest), cuts(len(rest)))
			if _, err := cliConn.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		got := <-replies
		cliConn.Close()
		if err := <-done; err != nil && err != io.EOF {
			t.Fatalf("session: %v", err)
		}
		_, batches := h.snapshot()
		for i := range batches {
			batches[i].Info = zico.Info{}
		}
		return batches, got
	}
	wantBatches, wantReplies := run(func(rest int) int { return rest })
	if len(wantBatches) != 6 || len(wantReplies) != frames {
		t.Fatalf("%d batches, %d replies", len(wantBatches), len(wantReplies))
	}
	for name, cuts := range map[string]func(int) int{
		"one byte":   func(int) int { return 1 },
		"seven":      func(int) int { return 7 },
		"random":     func(int) int { return 1 + rng.IntN(300) },
		"header+one": func(int) int { return codec.HeaderSize + 1 },
	} {
		batches, replies := run(cuts)
		if diff := cmp.Diff(wantBatches, batches); diff != "" {
			t.Fatalf("%s: traces (-whole +cut):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantReplies, replies); diff != "" {
			t.Fatalf("%s: replies (-whole +cut):\n%s", name, diff)
		}
	}
}
