package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/tracebridge/tracebridge/internal/apiclient"
	"github.com/tracebridge/tracebridge/internal/eql"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/query"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

const querySynopsis = `query [--store DIR | --url URL] [flags] [TEXT | ~REGEX]
       tracebridge query [--store DIR | --url URL] --trace-id ID [--find TEXT] [--rank]
       tracebridge query [--store DIR | --url URL] --pivot KEY [filters]

Searches a trace store (--store, default ./tracebridge-data/store; also
while its bridge runs; s3://BUCKET/PREFIX with --s3-endpoint for blocks in
object storage), or a running bridge over its HTTP API (--url
http://127.0.0.1:16686; a token, where one is needed, from the environment
variable TRACEBRIDGE_TOKEN). TEXT is a case-insensitive substring of
operation and class names, attribute keys and values, exception class and
message; ~REGEX a regular expression over the same; both look at the root
span unless --deep. docs/QUERY.md describes every filter and EQL.`

// queryFlags are the options of query.
type queryFlags struct {
	store                                                                       *storeLocation
	url, since, until, name, service, eql, cursor, traceID, find, fields, pivot string
	hosts, attrs                                                                repeatFlag
	minDur, maxDur                                                              time.Duration
	errors, deep, oldest, asJSON, rank, ignoreCase                              bool
	limit                                                                       int
	budget                                                                      time.Duration
}

func cmdQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("query", querySynopsis, stderr)
	var f queryFlags
	f.store = addStoreFlags(fs, filepath.Join("tracebridge-data", "store"), "the trace store (also of a bridge that is running)")
	fs.StringVar(&f.url, "url", "", "query a running bridge over its HTTP API instead (http://HOST:PORT)")
	fs.Var(&f.hosts, "host", "traces with a span on this host (repeatable)")
	fs.StringVar(&f.since, "since", "", "traces that started at or after: RFC 3339 or relative (15m, 2h, 7d)")
	fs.StringVar(&f.until, "until", "", "traces that started at or before: RFC 3339 or relative")
	fs.DurationVar(&f.minDur, "min-duration", 0, "traces at least this long (Go syntax: 250ms, 1500us, 3s)")
	fs.DurationVar(&f.maxDur, "max-duration", 0, "traces at most this long")
	fs.BoolVar(&f.errors, "errors", false, "traces with a span in error")
	fs.StringVar(&f.name, "name", "", "the trace's name: a zorka trace's type (HTTP, JMS, …), else its root operation (case-insensitive)")
	fs.StringVar(&f.service, "service", "", "traces with a span of this service")
	fs.Var(&f.attrs, "attr", "traces with a span whose attribute KEY=VALUE (repeatable)")
	fs.StringVar(&f.eql, "eql", "", "an EQL expression (docs/QUERY.md)")
	fs.BoolVar(&f.deep, "deep", false, "text, regex and EQL look at every span, not just the root")
	fs.BoolVar(&f.oldest, "oldest", false, "oldest first (default: newest first)")
	fs.IntVar(&f.limit, "limit", 20, "at most this many traces")
	fs.StringVar(&f.cursor, "cursor", "", "resume after the page that printed this cursor")
	fs.DurationVar(&f.budget, "budget", 5*time.Second, "stop searching after this long (2s once a trace is found, at most)")
	fs.BoolVar(&f.asJSON, "json", false, "one JSON object per trace and line, then {\"more\",\"cursor\",\"partial\"}")
	fs.StringVar(&f.traceID, "trace-id", "", "print this trace's tree (the JSON of traces --json)")
	fs.StringVar(&f.find, "find", "", "with --trace-id: the spans holding this text (or ~REGEX)")
	fs.StringVar(&f.fields, "fields", "all", "with --find: classes,methods,attributes,exceptions")
	fs.BoolVar(&f.ignoreCase, "ignore-case", false, "with --find: ignore case")
	fs.BoolVar(&f.rank, "rank", false, "with --trace-id: the method ranking (calls, errors, total, self, min, max)")
	fs.StringVar(&f.pivot, "pivot", "", "statistics of the selected traces grouped by this root attribute")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("query: at most one TEXT or ~REGEX (quote it)")
	}
	now := time.Now()
	q, err := f.query(pos, now)
	if err != nil {
		return err
	}
	var src query.Source
	if f.url != "" {
		storeSet := false
		fs.Visit(func(fl *flag.Flag) { storeSet = storeSet || fl.Name == "store" || fl.Name == "s3-endpoint" })
		if storeSet {
			return usagef("query: --store and --url exclude each other")
		}
		c, err := apiclient.New(f.url, os.Getenv("TRACEBRIDGE_TOKEN"))
		if err != nil {
			return usagef("query: --url: %v", err)
		}
		src = &query.Remote{Client: c, Params: f.params(pos, q)}
	} else {
		s, closeStore, err := f.store.open(store.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer closeStore()
		src = query.Local{Store: s}
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	switch {
	case f.traceID != "":
		return queryError(f.inTrace(ctx, src, out))
	case f.pivot != "":
		rows, partial, err := src.Pivot(ctx, q, f.pivot)
		if err != nil {
			return queryError(err)
		}
		if f.asJSON {
			enc := json.NewEncoder(out)
			for _, r := range rows {
				enc.Encode(r)
			}
			return enc.Encode(map[string]bool{"partial": partial})
		}
		fmt.Fprintf(out, "%-40s %8s %7s %12s %12s %12s\n", f.pivot, "calls", "errors", "sum", "min", "max")
		for _, r := range rows {
			fmt.Fprintf(out, "%-40s %8d %7d %12s %12s %12s\n", r.Value, r.Calls, r.Errors, time.Duration(r.Sum), time.Duration(r.Min), time.Duration(r.Max))
		}
		if partial {
			fmt.Fprintln(out, "(partial: the time budget ended the search)")
		}
		return nil
	}
	page, err := src.Search(ctx, q)
	if err != nil {
		return queryError(err)
	}
	if len(page.Traces) == 0 && !page.More {
		// Said on stderr, so that an empty answer is not taken for a
		// failure and stdout stays the results alone.
		if page.Partial {
			fmt.Fprintln(stderr, "query: no trace matched before the time budget ended (--budget)")
		} else {
			fmt.Fprintln(stderr, "query: no trace matched")
		}
	}
	if f.asJSON {
		for _, t := range page.Traces {
			b, _ := json.Marshal(t)
			out.Write(b)
			out.WriteByte('\n')
		}
		b, _ := json.Marshal(map[string]any{"more": page.More, "cursor": page.Cursor, "partial": page.Partial})
		out.Write(b)
		out.WriteByte('\n')
		return nil
	}
	for _, t := range page.Traces {
		mark := ""
		if t.Error {
			mark = fmt.Sprintf("  %d error%s", t.Errors, plural(t.Errors))
		}
		fmt.Fprintf(out, "%s  %10s  %-16s %4d spans  %s  %s%s\n", time.Unix(0, t.Start).UTC().Format("2006-01-02T15:04:05.000Z"),
			time.Duration(t.DurationNs).String(), t.Host, t.Spans, t.TraceID, t.Name, mark)
	}
	switch {
	case page.Partial:
		fmt.Fprintf(out, "(partial: the time budget ended the search; more with --cursor %s)\n", page.Cursor)
	case page.More:
		fmt.Fprintf(out, "(more with --cursor %s)\n", page.Cursor)
	}
	return nil
}

// query builds the store query the flags describe.
func (f *queryFlags) query(pos []string, now time.Time) (store.Query, error) {
	q := store.Query{Hosts: f.hosts, MinDuration: f.minDur, MaxDuration: f.maxDur, Errors: f.errors, Name: f.name,
		Service: f.service, Deep: f.deep, Oldest: f.oldest, Limit: f.limit, Cursor: f.cursor, TotalBudget: f.budget}
	if f.minDur < 0 || f.maxDur < 0 || f.limit <= 0 || f.limit > 100_000 || f.budget <= 0 {
		return q, usagef("query: durations must not be negative, --limit is 1 to 100000, --budget positive")
	}
	var err error
	if q.Since, err = parseWhen(f.since, now); err != nil {
		return q, usagef("query: --since: %v", err)
	}
	if q.Until, err = parseWhen(f.until, now); err != nil {
		return q, usagef("query: --until: %v", err)
	}
	for _, a := range f.attrs {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return q, usagef("query: --attr %q: want KEY=VALUE", a)
		}
		q.Attrs = append(q.Attrs, trace.Attr{Key: k, Value: v})
	}
	if len(pos) == 1 {
		if re, ok := strings.CutPrefix(pos[0], "~"); ok {
			if len(re) > 4096 {
				return q, usagef("query: the regular expression is over 4096 bytes")
			}
			if q.Regex, err = regexp.Compile(re); err != nil {
				return q, usagef("query: ~REGEX: %v", err)
			}
		} else {
			q.Text = pos[0]
		}
	}
	if f.eql != "" {
		e, err := eql.Parse(f.eql)
		if err != nil {
			return q, usagef("query: --eql: %v", err)
		}
		q.SetEQL(e)
	}
	return q, nil
}

// parseWhen parses RFC 3339 or a duration before now ("15m", "7d"); ""
// is 0 (unbounded).
func parseWhen(s string, now time.Time) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixNano(), nil
	}
	d, err := pipeline.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want RFC 3339 (2026-11-24T10:00:00Z) or a duration before now (15m, 2h, 7d)", s)
	}
	return now.Add(-d).UnixNano(), nil
}

// inTrace prints one trace, its spans matching --find, or its ranking.
func (f *queryFlags) inTrace(ctx context.Context, src query.Source, out io.Writer) error {
	if _, err := trace.ParseID(f.traceID); err != nil {
		return usagef("query: --trace-id: %v", err)
	}
	switch {
	case f.rank:
		rows, err := src.Rank(ctx, f.traceID)
		if err != nil {
			return err
		}
		if f.asJSON {
			enc := json.NewEncoder(out)
			for _, r := range rows {
				enc.Encode(r)
			}
			return nil
		}
		fmt.Fprintf(out, "%6s %6s %12s %12s %12s %12s  %s\n", "calls", "errors", "total", "self", "min", "max", "operation")
		for _, r := range rows {
			fmt.Fprintf(out, "%6d %6d %12s %12s %12s %12s  %s\n", r.Calls, r.Errors, time.Duration(r.Total), time.Duration(r.Self), time.Duration(r.Min), time.Duration(r.Max), r.Operation)
		}
		return nil
	case f.find != "":
		fields, ok := trace.ParseFields(f.fields)
		if !ok {
			return usagef("query: --fields %q: want classes, methods, attributes, exceptions or all", f.fields)
		}
		if r, ok := strings.CutPrefix(f.find, "~"); ok {
			if f.ignoreCase {
				r = "(?i)" + r
			}
			if _, err := regexp.Compile(r); err != nil {
				return usagef("query: --find: %v", err)
			}
		}
		hits, err := src.Find(ctx, f.traceID, f.find, fields, f.fields, f.ignoreCase)
		if err != nil {
			return err
		}
		for _, h := range hits {
			if f.asJSON {
				b, _ := json.Marshal(map[string]any{"index": h.Index, "spanId": h.SpanID, "depth": h.Depth, "operation": h.Operation, "component": h.Component})
				fmt.Fprintf(out, "%s\n", b)
				continue
			}
			fmt.Fprintf(out, "%5d %s%s  %s\n", h.Index, strings.Repeat("  ", int(h.Depth)), h.Operation, time.Duration(h.DurationNs))
		}
		return nil
	}
	b, err := src.Trace(ctx, f.traceID, f.asJSON)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

// params are the API's parameters of the flags: the same filters, times
// made absolute here (so "15m" means the same as with --store).
func (f *queryFlags) params(pos []string, q store.Query) url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	v["host"] = f.hosts
	if q.Since != 0 {
		set("since", time.Unix(0, q.Since).UTC().Format(time.RFC3339Nano))
	}
	if q.Until != 0 {
		set("until", time.Unix(0, q.Until).UTC().Format(time.RFC3339Nano))
	}
	if f.minDur > 0 {
		set("minDuration", f.minDur.String())
	}
	if f.maxDur > 0 {
		set("maxDuration", f.maxDur.String())
	}
	if f.errors {
		set("errors", "true")
	}
	set("name", f.name)
	set("service", f.service)
	v["attr"] = f.attrs
	if len(pos) == 1 {
		set("q", pos[0])
	}
	set("eql", f.eql)
	if f.deep {
		set("deep", "true")
	}
	set("budget", f.budget.String())
	return v
}

// queryError maps the sources' errors to messages and exit codes.
func queryError(err error) error {
	var bad *query.BadRequestError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrBadCursor):
		return usagef("query: --cursor: not a cursor this store made")
	case errors.As(err, &bad):
		return usagef("query: %s", bad.Msg)
	case errors.Is(err, query.ErrUnauthorized):
		return withCode(exitConfig, fmt.Errorf("%v (set TRACEBRIDGE_TOKEN)", err))
	case errors.Is(err, query.ErrUnreachable) && errors.Is(err, syscall.ECONNREFUSED):
		return withCode(exitComm, fmt.Errorf("%w\nno bridge answers at that address: start one with `tracebridge serve`, or search a stopped bridge's store with `query --store DIR`", err))
	case errors.Is(err, query.ErrUnreachable):
		return withCode(exitComm, err)
	}
	return err
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
