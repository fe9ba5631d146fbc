package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

// decode decodes a whole stream of the dialect into a batch.
func decode(t *testing.T, dialect string, stream []byte) *record.Batch {
	t.Helper()
	var b record.Batch
	var n int
	var err error
	switch dialect {
	case dialectKDB:
		m, merr := kdb.DefaultMapping(record.Builtin())
		if merr != nil {
			t.Fatal(merr)
		}
		n, err = kdb.NewDecoder(m, kdb.Options{}).Decode(stream, &b)
	case dialectKieker:
		n, err = kieker.NewDecoder(kieker.Options{Inline: true}).Decode(stream, &b)
	}
	if err != nil || n != len(stream) {
		t.Fatalf("%s: decoded %d of %d bytes: %v", dialect, n, len(stream), err)
	}
	return &b
}

func TestStreamsDecodeToTheEvents(t *testing.T) {
	cat := record.Builtin()
	sigs := benchkit.Signatures()
	evs := benchkit.Events(genSeed, 2, 300)
	for _, dialect := range []string{dialectKDB, dialectKieker} {
		t.Run(dialect, func(t *testing.T) {
			enc, err := newEncoder(dialect, cat, sigs)
			if err != nil {
				t.Fatal(err)
			}
			s, err := enc.stream(2, evs, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.firstEnds) != len(evs) || len(s.restEnds) != len(evs) ||
				s.firstEnds[len(evs)-1] != len(s.first) || s.restEnds[len(evs)-1] != len(s.rest) {
				t.Fatalf("record ends do not cover the chunks")
			}
			if dialect == dialectKieker && (len(s.first) <= len(s.rest) || bytes.Equal(s.first, s.rest)) {
				t.Fatalf("first Kieker chunk (%d bytes) should carry the registry the rest chunk (%d bytes) lacks", len(s.first), len(s.rest))
			}
			// first, rest, and a rest cut after 7 records: one connection
			// sending 2 chunks and 7 records, each repetition with its
			// own traceIds.
			wire := append([]byte(nil), s.first...)
			s.repeat(1)
			wire = append(wire, s.rest...)
			s.repeat(2)
			wire = append(wire, s.rest[:s.restEnds[6]]...)
			b := decode(t, dialect, wire)
			for i, ev := range evs[:7] {
				for rep := range int64(3) {
					if got, want := b.Records[int(rep)*len(evs)+i].Values[1].Int(), benchkit.RepeatID(ev.Trace, rep); got != want || (rep > 0) == (got == ev.Trace) {
						t.Fatalf("repetition %d, record %d: traceId %d, want %d (sent first as %d)", rep, i, got, want, ev.Trace)
					}
				}
			}
			streams := make([]*stream, 3)
			streams[2] = s
			v := &verifier{enc: enc, streams: streams, seen: make([]int64, 3), metadata: 1}
			if err := v.Consume(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			if v.first != nil {
				t.Fatalf("%d bad records; the first: %v", v.bad, v.first)
			}
			if want := int64(2*len(evs) + 7); v.seen[2] != want {
				t.Fatalf("%d records, want %d", v.seen[2], want)
			}
		})
	}
}

// TestStreamIDsFound: the traceId of every record is found for the
// connections and loads a run may have. Its 8 bytes alone also appear
// across the fields after it in some records (orderIndex and the string
// ids, or orderIndex and a string's length).
func TestStreamIDsFound(t *testing.T) {
	cat := record.Builtin()
	sigs := benchkit.Signatures()
	for _, dialect := range []string{dialectKDB, dialectKieker} {
		enc, err := newEncoder(dialect, cat, sigs)
		if err != nil {
			t.Fatal(err)
		}
		for _, calls := range []int{0, 1000} {
			for c := range 8 {
				evs := benchkit.TraceEvents(genSeed, c, 65536, calls)
				s, err := enc.stream(c, evs, false)
				if err != nil {
					t.Fatalf("%s, calls %d: %v", dialect, calls, err)
				}
				for i, at := range s.restIDs {
					if got := int64(binary.BigEndian.Uint64(s.rest[at:])); got != evs[i].Trace || at >= s.restEnds[i] || (i > 0 && at < s.restEnds[i-1]) {
						t.Fatalf("%s, calls %d, connection %d, event %d: traceId %d at %d, want %d within the record", dialect, calls, c, i, got, at, evs[i].Trace)
					}
				}
			}
		}
	}
}

func TestVerifierFindsChanges(t *testing.T) {
	cat := record.Builtin()
	sigs := benchkit.Signatures()
	enc, err := newEncoder(dialectKieker, cat, sigs)
	if err != nil {
		t.Fatal(err)
	}
	s, err := enc.stream(0, benchkit.Events(genSeed, 0, 20), false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(b *record.Batch)
		want   string
	}{
		{"order index", func(b *record.Batch) { b.Records[3].Values[2] = record.IntValue(99) }, "connection 0, record 3:"},
		{"signature", func(b *record.Batch) { b.Records[1].Values[3] = record.StringValue("x") }, "connection 0, record 1:"},
		{"logging timestamp", func(b *record.Batch) { b.Records[0].LoggingTimestamp = -1 }, "connection 0, record 0:"},
		{"lost record", func(b *record.Batch) { b.Records = append(b.Records[:2], b.Records[3:]...) }, "connection 0, record 2:"},
		{"unknown connection", func(b *record.Batch) { b.Records[0].Values[1] = record.IntValue(7 << benchkit.TraceShift) }, "names no connection"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := decode(t, dialectKieker, s.first)
			tt.change(b)
			v := &verifier{enc: enc, streams: []*stream{s}, seen: make([]int64, 1)}
			v.Consume(context.Background(), b)
			if v.first == nil || !bytes.Contains([]byte(v.first.Error()), []byte(tt.want)) {
				t.Fatalf("first error %v, want one containing %q", v.first, tt.want)
			}
		})
	}
}

func TestSendCountsRecordsAndBytes(t *testing.T) {
	cat := record.Builtin()
	sigs := benchkit.Signatures()
	evs := benchkit.Events(genSeed, 0, 50)
	r := int64(len(evs))
	for _, dialect := range []string{dialectKDB, dialectKieker} {
		enc, err := newEncoder(dialect, cat, sigs)
		if err != nil {
			t.Fatal(err)
		}
		s, err := enc.stream(0, evs, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int64{1, r - 1, r, r + 1, 3*r + 5} {
			t.Run(fmt.Sprintf("%s/%d", dialect, n), func(t *testing.T) {
				client, server := net.Pipe()
				got := make(chan []byte, 1)
				go func() {
					b, _ := io.ReadAll(server)
					got <- b
				}()
				out, err := send(client, s, n, time.Time{})
				client.Close()
				if err != nil {
					t.Fatal(err)
				}
				wire := <-got
				if out.records != n || out.bytes != int64(len(wire)) {
					t.Fatalf("send reports %+v; %d records and %d bytes were sent", out, n, len(wire))
				}
				b := decode(t, dialect, wire)
				if int64(b.Len()) != n {
					t.Fatalf("%d records decoded, want %d", b.Len(), n)
				}
				// Every repetition with its traceIds, whatever the
				// repetition the stream's rest held before.
				v := &verifier{enc: enc, streams: []*stream{s}, seen: make([]int64, 1), metadata: 1}
				v.Consume(context.Background(), b)
				if v.first != nil {
					t.Fatalf("%d bad records; the first: %v", v.bad, v.first)
				}
			})
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr bool
		want    options
	}{
		{nil, false, options{conns: 4, records: 2_000_000, chunk: 65536, rawRuns: 3, dialects: []string{"kdb", "kieker"}}},
		{[]string{"-conns", "1", "-dialects", "kieker", "-duration", "3s"}, false,
			options{conns: 1, records: 2_000_000, duration: 3 * time.Second, chunk: 65536, rawRuns: 3, dialects: []string{"kieker"}}},
		{[]string{"-same-ids", "-records", "100000000", "-chunk", "1000"}, false,
			options{conns: 4, records: 100_000_000, chunk: 1000, rawRuns: 3, dialects: []string{"kdb", "kieker"}, sameIDs: true}},
		{[]string{"-records", "100000000", "-chunk", "1000"}, true, options{}}, // 100,000 copies: ids would repeat
		{[]string{"-conns", "0"}, true, options{}},
		{[]string{"-dialects", "kdb,text"}, true, options{}},
		{[]string{"-records", "0"}, true, options{}},
		{[]string{"extra"}, true, options{}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.args), func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, *o, cmp.AllowUnexported(options{})); diff != "" {
				t.Fatalf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMain lets the test binary act as the baseline's discard server,
// which rawRun starts by running its own executable again.
func TestMain(m *testing.M) {
	if code, ok := benchkit.Child(roleEnv, "discard", "discard server", discardServer); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestRunSmall runs the whole benchmark on a few records: it builds and
// starts the real bridge, so it is skipped with -short.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tracebridge serve")
	}
	// Chunks of 1,000 events sent three times by each connection: the
	// store must hold every repetition's traces.
	o := &options{conns: 2, records: 3000, chunk: 1000, rawRuns: 1, dialects: []string{dialectKDB, dialectKieker}, store: true, calls: 20}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), o, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	for _, d := range o.dialects {
		for _, sinks := range []string{modeLog, modeStore} {
			row := regexp.MustCompile(`(?m)^ *` + d + ` +` + regexp.QuoteMeta(sinks) + ` +2 +6000 +\d+ +\d`)
			if !row.MatchString(stdout.String()) {
				t.Errorf("no %s %s row with 6000 records in\n%s", d, sinks, &stdout)
			}
		}
		// 2 × 3 × 1000 events of traces of 20 calls (40 events): 150 traces.
		if !strings.Contains(stdout.String(), d+" with the store: ") || !strings.Contains(stdout.String(), "150 traces stored, 150 sent") {
			t.Errorf("no %s store line with 150 traces stored in\n%s", d, &stdout)
		}
	}
}
