package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/stage/split"
)

const splitSynopsis = `split --boundary SPEC [--boundary SPEC…] [flags] IN OUT
       tracebridge split --merge [flags] IN OUT

Cuts every trace of the Kieker logs in IN where a call crosses a component
boundary into linked partial traces, and writes one log per input log under
OUT (named like the input's). --merge puts split traces back together.

Boundary specs (the first that matches a class names its component; a class
none matches is in a component of its own):
  package:N          the first N segments of the class's package
  regex:P1 P2 …      each pattern (matching the whole class name) a component
  map:FILE           lines pattern=component; # comments

Merge with the --max-* limits the split used (the defaults, normally).

Flags:`

// splitMaxEntries is split's default number of records per data file.
const splitMaxEntries = 1_000_000

// specList collects repeated --boundary flags (a spec holds ':', so
// listFlag's splitting does not fit).
type specList []string

func (l *specList) String() string { return strings.Join(*l, ";") }

func (l *specList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

type splitFlags struct {
	boundaries specList
	merge      bool
	to         string
	compress   string
	maxEntries int
	skipBad    bool
	libs       listFlag
	opts       split.Options
}

func cmdSplit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("split", splitSynopsis, stderr)
	var f splitFlags
	fs.Var(&f.boundaries, "boundary", "boundary spec: package:N, regex:PATTERN… or map:FILE (repeatable; ';' separates several)")
	fs.BoolVar(&f.merge, "merge", false, "put split traces back together instead of splitting")
	fs.StringVar(&f.to, "to", "", "output format: ascii or binary (default: that of each input log)")
	fs.StringVar(&f.compress, "compress", "none", "compression of the data files: none, deflate, gzip, zip or xz")
	fs.IntVar(&f.maxEntries, "max-entries", splitMaxEntries, "records per data file (Kieker's maxEntriesInFile; its default, 25000, makes thousands of files of a huge trace)")
	fs.BoolVar(&f.skipBad, "skip-bad", false, "skip malformed records instead of stopping, and report how many")
	fs.IntVar(&f.opts.MaxOpenTraces, "max-open-traces", split.DefaultMaxOpenTraces, "traces tracked at once; the least recently active beyond is passed through unsplit")
	fs.IntVar(&f.opts.MaxDepth, "max-depth", split.DefaultMaxDepth, "open calls per trace; a deeper trace passes through unsplit")
	fs.IntVar(&f.opts.MaxFrames, "max-frames", split.DefaultMaxFrames, "open calls of all traces together")
	fs.IntVar(&f.opts.MaxBuffered, "max-buffered", split.DefaultMaxBuffered, "records held back for incomplete OperationExecutionRecord traces")
	fs.Var(&f.libs, "L", "IRL file or directory with more record types (repeatable, or ':'-separated)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("split: want IN and OUT, got %d arguments", len(pos))
	}
	var bounds *split.Boundaries
	switch {
	case f.merge && len(f.boundaries) > 0:
		return usagef("split: --merge takes no --boundary")
	case !f.merge && len(f.boundaries) == 0:
		return usagef("split: no --boundary given (package:N, regex:PATTERN… or map:FILE)")
	case !f.merge:
		bounds, err = split.Parse(f.boundaries...)
		if errors.Is(err, split.ErrMapFile) {
			return withCode(exitConfig, err)
		}
		if err != nil {
			return usagef("split: %v", err)
		}
	}
	var binary *bool
	switch f.to {
	case "":
	case "ascii", "binary":
		b := f.to == "binary"
		binary = &b
	default:
		return usagef("split: --to must be ascii or binary")
	}
	comp, err := logdir.ParseCompression(f.compress)
	if err != nil {
		return usagef("split: --compress: %v", err)
	}
	if f.maxEntries <= 0 {
		return usagef("split: --max-entries must be positive")
	}
	for _, lim := range []struct {
		name string
		v    int
	}{{"max-open-traces", f.opts.MaxOpenTraces}, {"max-depth", f.opts.MaxDepth}, {"max-frames", f.opts.MaxFrames}, {"max-buffered", f.opts.MaxBuffered}} {
		if lim.v <= 0 {
			return usagef("split: --%s must be positive", lim.name)
		}
	}
	cat, err := loadCatalog(f.libs)
	if err != nil {
		return err
	}
	f.opts.Catalog = cat
	f.opts.MaxHold = -1 // the output must not depend on how fast the input is read

	logs, err := logdir.Discover(pos[0])
	if err != nil {
		return err
	}
	skips := &skipReporter{w: stderr}
	readers := make([]*srclog.Reader, len(logs))
	var total int64
	var bar *progress
	warn := warnCutEnd(stderr)
	cutEnd := func(err error) { // called while reading, once bar runs
		bar.pause()
		warn(err)
		bar.resume()
	}
	for i, l := range logs {
		if readers[i], err = srclog.Open(l.Path, srclog.Options{Catalog: cat, SkipBad: f.skipBad, OnSkip: skips.report, OnCutEnd: cutEnd}); err != nil {
			return err
		}
		total += readers[i].Size()
	}
	bar = startProgress(stderr, total, func() int64 {
		var n int64
		for _, r := range readers {
			n += r.Consumed()
		}
		return n
	})
	mal := &malformedReporter{w: stderr, bar: bar}
	f.opts.OnMalformed = mal.report

	start := time.Now()
	var sum split.Stats
	var read readStats
	for i, l := range logs {
		bin := binary
		if bin == nil {
			b, err := isBinary(l)
			if err != nil {
				bar.stop()
				return err
			}
			bin = &b
		}
		w, err := logwrite.New(logwrite.Config{
			Path:             pos[1],
			Binary:           *bin,
			Compression:      comp,
			MaxEntriesInFile: f.maxEntries,
			BufferSize:       1 << 20,
			NameFromMetadata: true, // the input's own KiekerMetadataRecord is copied
		})
		if err != nil {
			bar.stop()
			return err
		}
		// Reading and splitting on this goroutine, encoding and writing on
		// another (whose write system calls overlap the encoding, see
		// logdir.Files): two cores.
		out := newHandoff(ctx, w, 4)
		var stage interface {
			pipeline.Consumer
			Finish(context.Context) error
			Stats() split.Stats
		}
		if f.merge {
			stage = split.NewMerger(out, f.opts)
		} else {
			stage = split.New(bounds, out, f.opts)
		}
		runErr := readers[i].Run(ctx, stage)
		if runErr == nil {
			runErr = stage.Finish(ctx)
		}
		handErr := out.Close()
		closeErr := w.Close()
		if err := errors.Join(runErr, handErr, closeErr); err != nil {
			bar.stop()
			return err
		}
		bar.pause()
		fmt.Fprintf(stdout, "%s\n", w.Dir())
		bar.resume()
		add(&sum, stage.Stats())
		read.add(readers[i].Stats())
	}
	bar.stop()
	elapsed := time.Since(start)
	printSummary(stderr, f.merge, sum, total, elapsed)
	mal.summary(sum)
	read.report(stderr)
	return nil
}

// isBinary tells whether a log's data is binary (by its first data file).
func isBinary(l *logdir.Log) (bool, error) {
	files := l.DataFiles()
	if len(files) == 0 {
		return false, nil
	}
	s, err := files[0].Open()
	if err != nil {
		return false, fmt.Errorf("kieker log: %w", err)
	}
	defer s.Close()
	return !s.Format.Text, nil
}

func add(sum *split.Stats, s split.Stats) {
	sum.RecordsIn += s.RecordsIn
	sum.RecordsOut += s.RecordsOut
	sum.TracesIn += s.TracesIn
	sum.TracesOut += s.TracesOut
	sum.Partial += s.Partial
	sum.MaxNesting = max(sum.MaxNesting, s.MaxNesting)
	sum.MaxDepth = max(sum.MaxDepth, s.MaxDepth)
	sum.Malformed += s.Malformed
	sum.Evicted += s.Evicted
	for _, id := range s.MalformedIDs {
		if len(sum.MalformedIDs) < 10 {
			sum.MalformedIDs = append(sum.MalformedIDs, id)
		}
	}
}

func printSummary(w io.Writer, merge bool, s split.Stats, bytes int64, elapsed time.Duration) {
	rate := float64(bytes) / 1e6 / max(elapsed.Seconds(), 1e-9)
	if merge {
		fmt.Fprintf(w, "tracebridge: merged %d traces in (%d partial traces put back) into %d traces out; deepest nesting %d\n",
			s.TracesIn, s.Partial, s.TracesOut, s.MaxNesting)
	} else {
		fmt.Fprintf(w, "tracebridge: split %d traces in into %d partial traces out (%d cut); deepest nesting %d, deepest call stack %d\n",
			s.TracesIn, s.TracesOut, s.Partial, s.MaxNesting, s.MaxDepth)
	}
	fmt.Fprintf(w, "tracebridge: %d records in, %d out; %s in %.1f s (%.1f MB/s)\n",
		s.RecordsIn, s.RecordsOut, formatBytes(bytes), elapsed.Seconds(), rate)
}

// malformedReporter prints the first malformed traces as they are found.
type malformedReporter struct {
	w     io.Writer
	bar   *progress
	shown int
}

const maxShownMalformed = 20

func (m *malformedReporter) report(x split.Malformed) {
	m.shown++
	if m.shown > maxShownMalformed+1 {
		return
	}
	m.bar.pause()
	if m.shown <= maxShownMalformed {
		fmt.Fprintf(m.w, "tracebridge: passed through unsplit: %v\n", x)
	} else {
		fmt.Fprintln(m.w, "tracebridge: (further malformed traces not shown)")
	}
	m.bar.resume()
}

func (m *malformedReporter) summary(s split.Stats) {
	if s.Malformed == 0 {
		return
	}
	ids := make([]string, len(s.MalformedIDs))
	for i, id := range s.MalformedIDs {
		ids[i] = fmt.Sprint(id)
	}
	more := ""
	if s.Malformed > int64(len(ids)) {
		more = ", …"
	}
	fmt.Fprintf(m.w, "tracebridge: %d malformed traces passed through unsplit (traceIds %s%s)\n", s.Malformed, strings.Join(ids, ", "), more)
}

// progress draws a progress bar on a terminal: bytes done, rate and time
// left, redrawn five times a second. Without a terminal it does nothing.
type progress struct {
	w     io.Writer
	total int64
	done  func() int64
	start time.Time

	mu      sync.Mutex
	drawn   bool
	quit    chan struct{}
	stopped sync.WaitGroup
}

func startProgress(w io.Writer, total int64, done func() int64) *progress {
	p := &progress{w: w, total: total, done: done, start: time.Now()}
	if !isTerminal(w) {
		return p
	}
	p.quit = make(chan struct{})
	p.stopped.Add(1)
	go func() {
		defer p.stopped.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw()
				p.mu.Unlock()
			}
		}
	}()
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *progress) draw() {
	done := p.done()
	el := time.Since(p.start).Seconds()
	frac := 1.0
	if p.total > 0 {
		frac = min(float64(done)/float64(p.total), 1)
	}
	const width = 30
	fill := int(frac * width)
	rate := float64(done) / max(el, 1e-9)
	left := "?"
	if rate > 0 && done > 0 {
		left = formatDuration(time.Duration(float64(p.total-done) / rate * float64(time.Second)))
	}
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %s / %s  %s/s  %s left \x1b[K",
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill), 100*frac,
		formatBytes(done), formatBytes(p.total), formatBytes(int64(rate)), left)
	p.drawn = true
}

// pause clears the bar so that a line can be printed; resume lets it be
// drawn again.
func (p *progress) pause() {
	if p.quit == nil {
		return
	}
	p.mu.Lock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

func (p *progress) resume() {
	if p.quit != nil {
		p.mu.Unlock()
	}
}

// stop removes the bar for good. It is safe to call twice.
func (p *progress) stop() {
	if p.quit == nil {
		return
	}
	close(p.quit)
	p.stopped.Wait()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.quit = nil
}

func formatBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

func formatDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// handoff passes batches on to a consumer running on a goroutine of its
// own, so that reading and splitting use one core and encoding and writing
// another: a pipeline.Queue in front of the consumer. Consume copies the
// caller's batch (which the caller reuses when Consume returns) and queues
// it; the first error of the consumer is returned by the next Consume and
// by Close, and what is queued after it is dropped.
type handoff struct {
	q    *pipeline.Queue
	done chan struct{}

	mu  sync.Mutex
	err error
}

func newHandoff(ctx context.Context, next pipeline.Consumer, depth int) *handoff {
	h := &handoff{done: make(chan struct{})}
	guarded := pipeline.ConsumerFunc(func(ctx context.Context, b *record.Batch) error {
		if h.failed() != nil {
			return nil
		}
		return next.Consume(ctx, b)
	})
	h.q = pipeline.NewQueue(depth, guarded, func(err error) {
		h.mu.Lock()
		if h.err == nil {
			h.err = err
		}
		h.mu.Unlock()
	})
	go func() {
		defer close(h.done)
		h.q.Run(ctx)
	}()
	return h
}

func (h *handoff) failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *handoff) Consume(ctx context.Context, b *record.Batch) error {
	if err := h.failed(); err != nil {
		return err
	}
	return h.q.Consume(ctx, b)
}

// Close waits for the queued batches to be consumed. It must be called
// once, after the last Consume.
func (h *handoff) Close() error {
	h.q.Close()
	<-h.done
	return h.failed()
}
