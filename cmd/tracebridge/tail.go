package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/codec/textline"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/stream"
)

// streamFlags are what tail, dump and control share.
type streamFlags struct {
	types, hosts   repeatFlag
	prefix         string
	dataDir, creds string
	// A NATS server that wants another login than USER:PASSWORD, or
	// TLS with a CA of its own (an existing NATS cluster of cluster
	// nodes: their nats_token, nats_creds, nats_tls).
	natsToken, natsCreds   string
	tlsCA, tlsCert, tlsKey string
}

func (f *streamFlags) define(fs *flag.FlagSet, filters bool) {
	if filters {
		fs.Var(&f.types, "type", "only records of this type: a full or short class name (repeatable)")
		fs.Var(&f.hosts, "host", "only records of this monitored host (repeatable)")
	}
	fs.StringVar(&f.prefix, "prefix", "", "the bridge's subject prefix (stream: {subject_prefix}; default tracebridge)")
	fs.StringVar(&f.dataDir, "data-dir", stream.DefaultDataDir, "the bridge's data directory: a server on loopback gets its credential (DIR/nats/credentials)")
	fs.StringVar(&f.creds, "creds", "", "a file USER:PASSWORD for the server (a copy of the bridge's DATA_DIR/nats/credentials, from another machine)")
	fs.StringVar(&f.natsToken, "nats-token", "", "log in to the NATS server with this token (a cluster's nats_token)")
	fs.StringVar(&f.natsCreds, "nats-creds", "", "log in to the NATS server with this NATS credentials file: user JWT and NKey seed (a cluster's nats_creds)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "trust the NATS server's certificate if this CA (PEM) signed it (default: the system's roots)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "present this client certificate (PEM) to the NATS server, with --tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the client certificate's key (PEM)")
}

// tlsConfig is the client's TLS configuration the flags describe (nil: none).
func (f *streamFlags) tlsConfig() (*tls.Config, error) {
	if f.tlsCA == "" && f.tlsCert == "" && f.tlsKey == "" {
		return nil, nil
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	c, err := pipeline.ClientConfig(f.tlsCA, f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, withCode(exitConfig, fmt.Errorf("--tls-ca, --tls-cert, --tls-key: %w", err))
	}
	return c, nil
}

// openStream opens the stream at url; failures are communication errors.
func openStream(url string, sf *streamFlags) (*stream.Stream, error) {
	if !strings.Contains(url, "://") {
		return nil, usagef("%q: want the bridge's stream URL, nats://HOST:PORT (serve's default is nats://127.0.0.1:14222)", url)
	}
	if sf.natsToken != "" && sf.natsCreds != "" {
		return nil, usagef("give --nats-token or --nats-creds, not both")
	}
	tc, err := sf.tlsConfig()
	if err != nil {
		return nil, err
	}
	s, err := stream.Open(url, stream.Options{Prefix: sf.prefix, Name: "tracebridge cli", DataDir: sf.dataDir, CredsFile: sf.creds,
		Token: sf.natsToken, NATSCreds: sf.natsCreds, TLS: tc})
	if err != nil {
		return nil, withCode(exitComm, err)
	}
	return s, nil
}

// streamError maps the stream's errors to exit codes.
func streamError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, stream.ErrUnknownType):
		return usageError{err.Error()}
	case errors.Is(err, stream.ErrNoStream):
		return withCode(exitComm, err)
	case errors.Is(err, stream.ErrRefused):
		return withCode(exitConfig, err)
	}
	return withCode(exitComm, err)
}

const tailSynopsis = "tail nats://HOST:PORT [--type T…] [--host H…] [--since 10m | --from-seq N] [--until T] [--json] [--count N] [--metadata] [--traces] [--stats]"

func cmdTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tail", tailSynopsis, stderr)
	var sf streamFlags
	sf.define(fs, true)
	asJSON := fs.Bool("json", false, "print one JSON object per record, as cat --json does")
	since := fs.String("since", "", "start in the past: a duration before now (10m, 2h, 7d) or an RFC 3339 time; then follow live")
	fromSeq := fs.Uint64("from-seq", 0, "start at this repository sequence (tail --json --seq shows them); then follow live")
	until := fs.String("until", "", "stop at the first record published after this time (a duration before now or RFC 3339)")
	count := fs.Int("count", 0, "exit after N records")
	metadata := fs.Bool("metadata", false, "print the metadata messages too (the first, and every change)")
	traces := fs.Bool("traces", false, "print assembled traces too (JSON, one per line)")
	seq := fs.Bool("seq", false, "with --json, put each record's repository sequence and host beside it: {\"seq\":N,\"host\":H,\"record\":{…}}")
	stats := fs.Bool("stats", false, "instead of records, show rates per type and host every second, like top")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("tail: want one stream URL (nats://HOST:PORT), got %d arguments", len(pos))
	}
	if *since != "" && *fromSeq > 0 {
		return usagef("tail: --since and --from-seq exclude each other")
	}
	if *count < 0 {
		return usagef("tail: --count %d: want a number of records", *count)
	}
	s, err := openStream(pos[0], &sf)
	if err != nil {
		return err
	}
	defer s.Close()
	now := time.Now()
	switch {
	case *since != "":
		t, err := stream.ParseTime(*since, now)
		if err != nil {
			return usagef("tail: --since: %v", err)
		}
		s.SetStartTime(t)
	case *fromSeq > 0:
		s.SetStartSequence(*fromSeq)
	}
	if *until != "" {
		t, err := stream.ParseTime(*until, now)
		if err != nil {
			return usagef("tail: --until: %v", err)
		}
		s.SetEndTime(t)
	}
	md, err := s.Metadata(ctx)
	if err != nil {
		return streamError(err)
	}
	types, err := stream.ResolveTypes(md, sf.types)
	if err != nil {
		return streamError(fmt.Errorf("tail: %w", err))
	}
	s.SetHosts(sf.hosts...)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := bufio.NewWriterSize(stdout, 64<<10)
	var mu sync.Mutex // the stats ticker writes too
	var line []byte
	n := 0
	var top *rates
	if *stats {
		top = &rates{counts: map[[2]string]int64{}, start: time.Now()}
	}
	handle := func(e *stream.Event) {
		mu.Lock()
		defer mu.Unlock()
		if top != nil {
			top.counts[[2]string{e.Type.Name, e.Host}]++
			return
		}
		if *count > 0 && n >= *count {
			return // the rest of the batch, after cancel
		}
		line = line[:0]
		switch {
		case *asJSON && *seq:
			line = fmt.Appendf(line, `{"seq":%d,"host":`, e.Seq)
			line = jsonl.AppendString(line, e.Host)
			if e.Node != "" { // a cluster's repository: the node that received it
				line = append(line, `,"node":`...)
				line = jsonl.AppendString(line, e.Node)
			}
			line = append(line, `,"record":`...)
			line = jsonl.AppendRecord(line, &e.Record)
			line = append(line[:len(line)-1], "}\n"...)
		case *asJSON:
			line = jsonl.AppendRecord(line, &e.Record)
		default:
			line = textline.AppendRecord(line, &e.Record)
		}
		out.Write(line)
		n++
		if *count > 0 && n >= *count {
			cancel()
		}
	}
	if len(types) == 0 {
		s.OnEvent("", handle)
	}
	for _, t := range types {
		s.OnEvent(t, handle)
	}
	if *metadata {
		s.OnMetadata(func(m *stream.Metadata) {
			mu.Lock()
			defer mu.Unlock()
			if *asJSON {
				b, _ := json.Marshal(map[string]any{"metadata": m})
				out.Write(append(b, '\n'))
				out.Flush()
				return
			}
			of := ""
			if m.Node != "" {
				of = " of node " + m.Node
			}
			fmt.Fprintf(out, "# metadata%s version %d (run %d): %d types, %d hosts, %d receivers%s\n",
				of, m.Version, m.Run, len(m.Types), len(m.Hosts), len(m.Receivers), describeChange(m))
			out.Flush()
		})
	}
	if *traces {
		s.OnTrace(func(t *stream.Trace) {
			mu.Lock()
			defer mu.Unlock()
			out.Write(append(t.JSON, '\n'))
		})
	}
	s.OnFlush(func() {
		mu.Lock()
		out.Flush()
		mu.Unlock()
	})
	s.OnGap(func(g stream.Gap) {
		mu.Lock()
		out.Flush()
		mu.Unlock()
		fmt.Fprintf(stderr, "tracebridge: %v\n", &stream.GapError{Gap: g})
	})
	s.OnError(func(err error) { fmt.Fprintf(stderr, "tracebridge: %v\n", err) })
	if top != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					mu.Lock()
					top.print(out)
					out.Flush()
					mu.Unlock()
				}
			}
		}()
	}
	err = s.Start(ctx)
	mu.Lock()
	defer mu.Unlock()
	if top != nil {
		top.print(out)
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return streamError(err)
}

// describeChange says what a metadata version added and removed.
func describeChange(m *stream.Metadata) string {
	var parts []string
	for _, c := range []struct {
		what string
		ch   []string
	}{
		{"added types", m.Added.Types}, {"added hosts", m.Added.Hosts}, {"added receivers", m.Added.Receivers}, {"control", m.Added.Control},
		{"removed types", m.Removed.Types}, {"removed hosts", m.Removed.Hosts}, {"control ended", m.Removed.Control},
	} {
		if len(c.ch) > 0 {
			parts = append(parts, c.what+": "+strings.Join(c.ch, ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// rates counts records per type and host for --stats.
type rates struct {
	counts map[[2]string]int64
	last   map[[2]string]int64
	lastAt time.Time
	start  time.Time
}

// print writes a table: records per second since the last table, and in
// all, per type and host, busiest first.
func (r *rates) print(w io.Writer) {
	now := time.Now()
	since := r.lastAt
	if since.IsZero() {
		since = r.start
	}
	secs := now.Sub(since).Seconds()
	keys := slices.Collect(maps.Keys(r.counts))
	rate := func(k [2]string) float64 { return float64(r.counts[k]-r.last[k]) / secs }
	slices.SortFunc(keys, func(a, b [2]string) int {
		if d := rate(b) - rate(a); d != 0 {
			if d > 0 {
				return 1
			}
			return -1
		}
		return strings.Compare(a[0]+a[1], b[0]+b[1])
	})
	var total, totalRate float64
	fmt.Fprintf(w, "%s  %-40s %-24s %12s %12s\n", now.Format("15:04:05"), "TYPE", "HOST", "RECORDS/S", "RECORDS")
	for _, k := range keys {
		host := k[1]
		if host == "" {
			host = "-"
		}
		fmt.Fprintf(w, "          %-40s %-24s %12.0f %12d\n", shortType(k[0]), host, rate(k), r.counts[k])
		total += float64(r.counts[k])
		totalRate += rate(k)
	}
	fmt.Fprintf(w, "          %-40s %-24s %12.0f %12.0f\n\n", "all", "", totalRate, total)
	r.last = maps.Clone(r.counts)
	r.lastAt = now
}

func shortType(n string) string { return n[strings.LastIndexByte(n, '.')+1:] }
