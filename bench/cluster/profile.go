package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// shares are the parts of a cluster's CPU samples reported beside its top
// functions: a sample counts for a part when a frame of its stack matches
// (`go tool pprof -focus`), so the parts overlap where one calls the
// other (the NATS client's writes end in syscalls).
var shares = []struct{ name, focus string }{
	{"embedded NATS server (nats-server/v2)", `github\.com/nats-io/nats-server/v2/`},
	{"NATS client (nats.go)", `github\.com/nats-io/nats\.go`},
	{"tracebridge cluster package", `tracebridge/internal/cluster\.`},
	{"OTLP receiver and decoding", `tracebridge/internal/(source/otlp|codec/otlp)`},
	{"trace store and its sink", `tracebridge/internal/(store|sink/store)\.`},
	{"garbage collector", `runtime\.gcBgMarkWorker|runtime\.gcAssist|runtime\.mallocgc`},
}

// profileCluster runs one more ingest phase of c (t), not counted in the
// rounds, with a CPU profile of each node over the load and the settling
// after it, and writes the profiles, the top functions of the three
// together (`go tool pprof -top`) and the shares above into o.profile.
func profileCluster(ctx context.Context, c *cluster, t *target, body func() []byte, o options, logf func(string, ...any)) error {
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return err
	}
	tag := filepath.Base(c.bin)
	secs := int(o.dur.Seconds()) + 10
	var files []string
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	// The idle measurement of measure takes 5 s: the profiles start
	// with the load.
	for i, nd := range c.nodes {
		f := filepath.Join(o.profile, fmt.Sprintf("%s-%s%d.cpu.pb.gz", tag, c.name, i+1))
		files = append(files, f)
		wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
			errs[i] = benchkit.Fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", nd.pprof, secs), f)
		})
	}
	s, err := measure(ctx, t, body, o)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("%s (profiled): %w", t.name, err)
	}
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%s: %d spans, %.1f CPU-s (%.1f raw), %.0f spans/CPU-s (%.0f raw); CPU profiles of the 3 nodes over %d s from the load's start; %s\n\n",
		t.name, s.spans, s.net, s.raw, s.perCPU(), s.perRaw(), secs, time.Now().UTC().Format(time.RFC3339))
	top, err := benchkit.Pprof(ctx, append([]string{"-top", "-nodecount=25"}, files...)...)
	if err != nil {
		return err
	}
	out.WriteString(top)
	out.WriteString("\nshares of the samples (a stack with a frame of):\n")
	for _, sh := range shares {
		o, err := benchkit.Pprof(ctx, append([]string{"-top", "-nodecount=1000000", "-nodefraction=0", "-focus=" + sh.focus}, files...)...)
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "  %-40s %s\n", sh.name, share(o))
	}
	file := filepath.Join(o.profile, tag+"-"+c.name+".top.txt")
	if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
		return err
	}
	logf("profiled %s: %.0f spans/CPU-s (%.0f raw); top functions and shares in %s", t.name, s.perCPU(), s.perRaw(), file)
	return nil
}

var showing = regexp.MustCompile(`Showing nodes accounting for ([0-9.]+m?s),`)
var totalLine = regexp.MustCompile(`Total samples = ([0-9.]+m?s)`)

// share reads the samples a focused `pprof -top` of every node kept (the
// sum of their flat times) against the profile's total: "32.0%  3.1s of
// 9.8s".
func share(top string) string {
	m, t := showing.FindStringSubmatch(top), totalLine.FindStringSubmatch(top)
	if m == nil || t == nil {
		return "(none)"
	}
	kept, err1 := time.ParseDuration(m[1])
	total, err2 := time.ParseDuration(t[1])
	if err1 != nil || err2 != nil || total == 0 {
		return "(none)"
	}
	return fmt.Sprintf("%5.1f%%  %v of %v", 100*kept.Seconds()/total.Seconds(), kept.Round(10*time.Millisecond), total.Round(10*time.Millisecond))
}
