package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/record"
)

// The generated trace: one root call that returns only at the very end,
// under it call trees up to 16 deep through classes of four packages. A
// callee stays in its caller's package three times in four, so that with
// package:3 about one call in eight crosses a boundary.
var packages = [][]string{
	{"com.acme.web.Controller", "com.acme.web.View"},
	{"com.acme.svc.Orders", "com.acme.svc.Cache", "com.acme.svc.Prices"},
	{"com.acme.db.Repository", "com.acme.db.Query"},
	{"com.acme.util.Strings", "com.acme.util.Clock"},
}

const (
	traceID      = 4658150164341456896
	periodEvents = 1 << 16    // events in one period of the generated tree
	maxDepth     = 16         // below the root call
	fileLimit    = 256 << 20  // bytes per data file
	frameSize    = 40         // a Before/After frame: id, logging timestamp, 5 fields
	offTimestamp = 4          // logging timestamp
	offEventTime = 12         // timestamp field
	offOrder     = 28         // orderIndex field
	eventStep    = int64(100) // ns between events
)

// generated describes a generated log.
type generated struct {
	dir     string
	bytes   int64
	records int64
}

// generate writes a Kieker binary log directory under dir holding one
// trace of about size bytes: a KiekerMetadataRecord, the TraceMetadata,
// the root Before, periods of call trees, the root After. Periods are
// encoded once and written again and again with orderIndex and timestamps
// patched, so generating is disk-bound.
func generate(dir string, size int64) (*generated, error) {
	cat := record.Builtin()
	reg := &kieker.Registry{}
	enc := kieker.NewEncoder(kieker.EncoderOptions{Registry: reg})
	now := time.Now()
	logDir := filepath.Join(dir, logdir.DirName(now, now.UnixNano(), "bench-host", "KIEKER"))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	g := &generated{dir: logDir}

	before, after := cat.Lookup(record.BeforeOperationEvent), cat.Lookup(record.AfterOperationEvent)
	event := func(t *record.Type, class string) record.Record {
		return record.Record{Type: t, LoggingTimestamp: 0, Values: []record.Value{
			record.IntValue(0), record.IntValue(traceID), record.IntValue(0),
			record.StringValue("public void " + class + ".run()"), record.StringValue(class),
		}}
	}
	var head, period, tail []byte
	var err error
	meta := record.Record{Type: cat.Lookup(record.KiekerMetadataRecord), LoggingTimestamp: now.UnixNano(), Values: []record.Value{
		record.StringValue("2.0.3"), record.StringValue("KIEKER"), record.StringValue("bench-host"), record.IntValue(1),
		record.BoolValue(false), record.IntValue(0), record.StringValue("NANOSECONDS"), record.IntValue(0),
	}}
	tm := record.Record{Type: cat.Lookup(record.TraceMetadata), LoggingTimestamp: now.UnixNano(), Values: []record.Value{
		record.IntValue(traceID), record.IntValue(1), record.StringValue("<no-session-id>"), record.StringValue("bench-host"),
		record.IntValue(traceID), record.IntValue(-1),
	}}
	root := event(before, "com.acme.Main")
	for _, r := range []*record.Record{&meta, &tm, &root} {
		if head, err = enc.Append(head, r); err != nil {
			return nil, err
		}
	}
	rootEnd := event(after, "com.acme.Main")
	if tail, err = enc.Append(tail, &rootEnd); err != nil {
		return nil, err
	}
	// One period: call trees from depth 1 back to depth 1.
	rng := rand.New(rand.NewPCG(7, 11))
	var stack []int
	events := 0
	for events < periodEvents || len(stack) > 0 {
		var r record.Record
		if len(stack) < maxDepth && (len(stack) == 0 || rng.IntN(2) == 0) && events < periodEvents {
			pkg := rng.IntN(len(packages))
			if len(stack) > 0 && rng.IntN(4) != 0 {
				pkg = stack[len(stack)-1]
			}
			stack = append(stack, pkg)
			r = event(before, packages[pkg][rng.IntN(len(packages[pkg]))])
		} else {
			pkg := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			r = event(after, packages[pkg][0])
		}
		if period, err = enc.Append(period, &r); err != nil {
			return nil, err
		}
		events++
	}
	if len(period) != events*frameSize || len(tail) != frameSize {
		return nil, fmt.Errorf("generator: frames of %d bytes, want %d", len(period)/events, frameSize)
	}
	var mapBuf []byte
	for _, e := range enc.NewEntries() {
		mapBuf = kieker.AppendMapEntry(mapBuf, e.ID, e.Value)
	}
	if err := os.WriteFile(filepath.Join(logDir, logdir.MapFile), mapBuf, 0o644); err != nil {
		return nil, err
	}

	w := &fileWriter{dir: logDir, now: now}
	defer w.close()
	if err := w.write(head); err != nil {
		return nil, err
	}
	g.records = 3
	order := int64(1) // the root Before has 0
	stamp := now.UnixNano()
	for w.total+int64(len(period))+frameSize <= size || g.records == 3 {
		for off := 0; off < len(period); off += frameSize {
			f := period[off : off+frameSize]
			binary.BigEndian.PutUint64(f[offTimestamp:], uint64(stamp))
			binary.BigEndian.PutUint64(f[offEventTime:], uint64(stamp))
			binary.BigEndian.PutUint32(f[offOrder:], uint32(int32(order)))
			stamp += eventStep
			order++
		}
		if err := w.write(period); err != nil {
			return nil, err
		}
		g.records += int64(events)
	}
	binary.BigEndian.PutUint64(tail[offTimestamp:], uint64(stamp))
	binary.BigEndian.PutUint64(tail[offEventTime:], uint64(stamp))
	binary.BigEndian.PutUint32(tail[offOrder:], uint32(int32(order)))
	if err := w.write(tail); err != nil {
		return nil, err
	}
	g.records++
	if err := w.close(); err != nil {
		return nil, err
	}
	g.bytes = w.total
	return g, nil
}

// fileWriter writes data files of at most fileLimit bytes (cut at frame
// boundaries, as every write is whole frames).
type fileWriter struct {
	dir   string
	now   time.Time
	n     int
	f     *os.File
	bw    *bufio.Writer
	size  int64
	total int64
}

func (w *fileWriter) write(p []byte) error {
	if w.f == nil || w.size+int64(len(p)) > fileLimit {
		if err := w.close(); err != nil {
			return err
		}
		w.n++
		f, err := os.Create(filepath.Join(w.dir, logdir.DataFileName(w.now, w.n, true, logdir.None)))
		if err != nil {
			return err
		}
		w.f, w.bw, w.size = f, bufio.NewWriterSize(f, 1<<20), 0
	}
	if _, err := w.bw.Write(p); err != nil {
		return err
	}
	w.size += int64(len(p))
	w.total += int64(len(p))
	return nil
}

func (w *fileWriter) close() error {
	if w.f == nil {
		return nil
	}
	err := w.bw.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}
