package jfr_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	jfr "github.com/tracebridge/tracebridge/internal/source/jfr"
)

// What `tracebridge cat --json --type shop.Order RECORDING.jfr` does.
func Example_cat() {
	src, err := jfr.New(jfr.Config{Path: "recording.jfr", Types: []string{"shop.Order"}}, jfr.Settings{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	var line []byte
	err = src.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			line = jsonl.AppendRecord(line[:0], &b.Records[i])
			w.Write(line)
		}
		return nil
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if st := src.Stats(); st.Errors > 0 {
		fmt.Fprintf(os.Stderr, "%d damaged chunks or events skipped\n", st.Errors)
	}
}

// A receiver following a JVM started with
// -XX:StartFlightRecording -XX:FlightRecorderOptions:repository=/var/jfr,
// here feeding a per-thread, per-minute CPU profile.
func Example_follow() {
	src, err := jfr.New(jfr.Config{Path: "/var/jfr", Follow: true, Start: jfr.StartNewest},
		jfr.Settings{Logger: slog.Default()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	profile := &flame.Aggregator{Group: flame.ByField("sampledThread"), Window: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := src.Run(ctx, profile); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	for _, p := range profile.Profiles() {
		f, _ := os.Create(fmt.Sprintf("%s-%d.svg", p.Group, p.Start))
		p.Stacks.WriteSVG(f, flame.SVGOptions{Title: "CPU " + p.Group})
		f.Close()
	}
}
