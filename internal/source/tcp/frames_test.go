package tcp

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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

// TestFramesOnlyConnection: a Kieker connection whose decoder keeps the
// records of the types no consumer reads as frames only hands on batches
// of frames only (the metadata, which it is told to decode, in batches of
// records), whatever the pieces the stream arrives in; written into a log
// as the Kieker log writer does, they are the records a plain decoder
// gives, and the per-type metrics count every record.
func TestFramesOnlyConnection(t *testing.T) {
	data := corpus(t, "kieker-streams", "java-tcp.bin")
	recs, _, err := decodeKieker(t, data)
	if err != nil {
		t.Fatal(err)
	}
	// The stream's records again, without its registry entries and
	// metadata: bare frames after the first copy.
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	var stream []byte
	for range 4 {
		for i := range recs {
			if stream, err = enc.Append(stream, &recs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	only := func(t *record.Type) bool { return t.Name != record.KiekerMetadataRecord }
	cfg := Config{NewDecoder: KiekerDecoder(kieker.Options{KeepFrames: true, FramesOnly: only})}
	reg := &kieker.Registry{}
	rec, logEnc := kieker.NewRecoder(reg), kieker.NewEncoder(kieker.EncoderOptions{Registry: reg})
	var mu sync.Mutex
	var log []byte
	strs := kieker.NewStrings(0)
	var onlyBatches, recBatches, n int
	e := start(t, cfg, func(c *collector) pipeline.Consumer {
		return pipeline.ConsumerFunc(func(ctx context.Context, b *record.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			n += b.Len()
			if b.Frames.Only() {
				onlyBatches++
				var err error
				if log, err = rec.AppendOnly(log, &b.Frames, 0, b.Len()); err != nil {
					return err
				}
			} else {
				recBatches++
				if !b.Frames.Valid(b.Len()) {
					return fmt.Errorf("a batch of %d records with %d frames", b.Len(), len(b.Frames.Ends))
				}
				for i := 0; i < b.Len(); {
					var k int
					log, k = rec.Append(log, b.Records[i:], &b.Frames, i)
					if i += k; i < b.Len() {
						var err error
						if log, err = logEnc.Append(log, &b.Records[i]); err != nil {
							return err
						}
						for _, en := range logEnc.NewEntries() {
							strs.Set(en.ID, en.Value)
						}
						i++
					}
				}
			}
			for _, en := range rec.NewEntries() {
				strs.Set(en.ID, en.Value)
			}
			return nil
		})
	})
	c := dial(t, e.r.Addr())
	sendPieces(t, c, stream, 5)
	c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := n
		mu.Unlock()
		if got == 4*len(recs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records handed on", got, 4*len(recs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if onlyBatches == 0 || recBatches == 0 {
		t.Errorf("%d batches of frames only, %d of records: want both (the metadata decoded)", onlyBatches, recBatches)
	}
	var back record.Batch
	if k, err := kieker.NewDecoder(kieker.Options{Strings: strs}).Decode(log, &back); err != nil || k != len(log) {
		t.Fatalf("reading the log: %d of %d bytes, %v", k, len(log), err)
	}
	want := append(append(append(append([]record.Record(nil), recs...), recs...), recs...), recs...)
	if diff := cmp.Diff(recStrings(want), recStrings(back.Records)); diff != "" {
		t.Errorf("the log from frames only (-sent +written):\n%s", diff)
	}
	total := 0.0
	mfs, err := e.reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tracebridge_records_received_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	if total != float64(4*len(recs)) {
		t.Errorf("tracebridge_records_received_total sums to %v, want %d", total, 4*len(recs))
	}
}
