package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// profiles runs one more phase per tracebridge server (those serving
// /debug/pprof/) and protocol, after the measured rounds and not counted
// in them, taking a CPU profile over the whole phase (as long as the
// median phase, plus two seconds: idle time adds no samples) and the
// allocations over the whole phase
// (the difference of /debug/pprof/allocs before and after). It writes the
// profiles and their top 10 functions (`go tool pprof -top`) into
// o.profile.
func profiles(ctx context.Context, o *options, targets []*target, reqs []request, logf func(string, ...any)) error {
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return err
	}
	for _, t := range targets {
		if t.pprof == "" {
			continue
		}
		for _, p := range o.protocols {
			base := filepath.Join(o.profile, t.name+"-"+p)
			secs := int(median(t.samples[p]).wall.Seconds()) + 2
			url := "http://" + t.pprof + "/debug/pprof/"
			if err := benchkit.Fetch(ctx, url+"allocs", base+".allocs-before.pb.gz"); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			cpu := make(chan error, 1)
			go func() { cpu <- benchkit.Fetch(ctx, fmt.Sprintf("%sprofile?seconds=%d", url, secs), base+".cpu.pb.gz") }()
			s, err := phase(ctx, o, t, p, reqs, o.spans)
			if err != nil {
				return fmt.Errorf("%s %s (profiled): %w", t.name, p, err)
			}
			if err := <-cpu; err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if err := benchkit.Fetch(ctx, url+"allocs", base+".allocs-after.pb.gz"); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			logf("profiled %-4s %-13s %d spans, %.2f CPU-s, %.0f spans/CPU-s, %.2f s (CPU profile over %d s)",
				p, t.name, s.spans, s.cpu.Seconds(), s.perCPU(), s.wall.Seconds(), secs)
			var top strings.Builder
			fmt.Fprintf(&top, "%s %s: %d spans, %.2f CPU-s, %.2f s wall; CPU profile over %d s from the phase's start; %s\n\n", t.name, p, s.spans, s.cpu.Seconds(), s.wall.Seconds(), secs, time.Now().UTC().Format(time.RFC3339))
			for _, args := range [][]string{
				{"-top", "-nodecount=10", base + ".cpu.pb.gz"},
				{"-top", "-nodecount=10", "-sample_index=alloc_space", "-base", base + ".allocs-before.pb.gz", base + ".allocs-after.pb.gz"},
			} {
				out, err := benchkit.Pprof(ctx, args...)
				if err != nil {
					return err
				}
				top.WriteString(out)
				top.WriteString("\n")
			}
			if err := os.WriteFile(base+".top.txt", []byte(top.String()), 0o644); err != nil {
				return err
			}
			logf("top 10 (CPU, alloc_space) in %s.top.txt", base)
		}
	}
	return nil
}
