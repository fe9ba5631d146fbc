package tcp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TestFramesKeptUnlessTransformed: a Kieker connection whose decoder keeps
// frames hands on batches whose frames match their records, and none once
// a transform changed the records.
func TestFramesKeptUnlessTransformed(t *testing.T) {
	recs, _, err := decodeKieker(t, corpus(t, "kieker-streams", "java-tcp.bin"))
	if err != nil {
		t.Fatal(err)
	}
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	var data []byte
	for range 4 {
		for i := range recs {
			if data, err = enc.Append(data, &recs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, transform := range []bool{false, true} {
		cfg := Config{NewDecoder: KiekerDecoder(kieker.Options{KeepFrames: true})}
		if transform {
			cfg.Transform = func(*record.Batch, int) {}
		}
		var valid, invalid atomic.Int32
		e := start(t, cfg, func(c *collector) pipeline.Consumer {
			return pipeline.ConsumerFunc(func(ctx context.Context, b *record.Batch) error {
				if b.Frames.Valid(b.Len()) {
					valid.Add(1)
				} else {
					invalid.Add(1)
				}
				return c.Consume(ctx, b)
			})
		})
		c := dial(t, e.r.Addr())
		sendPieces(t, c, data, 5)
		c.Close()
		e.col.wait(t, 4*len(recs), 10*time.Second)
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
		if transform && (valid.Load() != 0 || invalid.Load() == 0) || !transform && (valid.Load() == 0 || invalid.Load() != 0) {
			t.Errorf("transform %v: %d batches with frames, %d without", transform, valid.Load(), invalid.Load())
		}
	}
}
