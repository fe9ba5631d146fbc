package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/serve"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/stomp"
)

// TestMain lets the test binary act as the embedded broker process, which
// publishOnly starts by running its own executable again.
func TestMain(m *testing.M) {
	if code, ok := benchkit.Child(roleEnv, roleEmbedded, "embedded broker", embeddedBroker); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestSplit(t *testing.T) {
	tests := []struct {
		total int64
		pubs  int
		want  []int
	}{
		{10, 1, []int{10}},
		{10, 3, []int{4, 3, 3}},
		{2, 2, []int{1, 1}},
		{200_001, 2, []int{100_001, 100_000}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.total, "/", tt.pubs), func(t *testing.T) {
			if diff := cmp.Diff(tt.want, split(tt.total, tt.pubs)); diff != "" {
				t.Fatalf("split (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenEventsAreUnique(t *testing.T) {
	for _, n := range []int{1, 7, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			evs := genEvents(1, n)
			if len(evs) != n {
				t.Fatalf("%d events, want %d", len(evs), n)
			}
			if again := genEvents(1, n); !cmp.Equal(evs, again) {
				t.Fatal("genEvents is not deterministic")
			}
			type key struct {
				trace int64
				order int32
			}
			seen := map[key]bool{}
			for i, ev := range evs {
				if int(ev.Trace>>benchkit.TraceShift) != 2 {
					t.Fatalf("event %d: traceId %d does not name publisher 1", i, ev.Trace)
				}
				k := key{ev.Trace, ev.Order}
				if seen[k] {
					t.Fatalf("event %d: traceId %d orderIndex %d twice", i, ev.Trace, ev.Order)
				}
				seen[k] = true
				if i > 0 && ev.Trace == evs[i-1].Trace && ev.Order != evs[i-1].Order+1 {
					t.Fatalf("event %d: orderIndex %d after %d", i, ev.Order, evs[i-1].Order)
				}
			}
		})
	}
}

// decodeLoad decodes what a load sends, message by message (or its
// binary stream), into one batch, and returns the batch and the records
// of each message.
func decodeLoad(t *testing.T, l *load) (*record.Batch, []int) {
	t.Helper()
	m, err := kdb.DefaultMapping(record.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	var b record.Batch
	if l.messages() == 0 {
		n, err := kdb.NewDecoder(m, kdb.Options{}).Decode(l.bin, &b)
		if err != nil || n != len(l.bin) {
			t.Fatalf("binary stream: decoded %d of %d bytes: %v", n, len(l.bin), err)
		}
		return &b, nil
	}
	dec := kdb.NewTextDecoder(m, kdb.Options{})
	var per []int
	for k := 0; k < l.messages(); k++ {
		msg := l.message(k)
		if len(msg) == 0 || msg[0] < '0' || msg[0] > '9' || bytes.HasSuffix(msg, []byte("\n")) {
			t.Fatalf("message %d %q: want KDB text starting with its id and no trailing newline", k, msg)
		}
		n, err := dec.DecodeMessage(msg, &b)
		if err != nil {
			t.Fatalf("message %d: %v", k, err)
		}
		per = append(per, n)
	}
	return &b, per
}

func TestLoadsDecodeToTheirEvents(t *testing.T) {
	cat := record.Builtin()
	sigs := benchkit.Signatures()
	tests := []struct {
		n, perMsg int
		want      []int // records per message (nil: binary)
	}{
		{5, 0, nil},
		{500, 0, nil},
		{5, 1, []int{1, 1, 1, 1, 1}},
		{7, 3, []int{3, 3, 1}},
		{6, 3, []int{3, 3}},
		{250, 100, []int{100, 100, 50}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%d", tt.n, tt.perMsg), func(t *testing.T) {
			l, err := newLoad(1, tt.n, tt.perMsg, cat, sigs)
			if err != nil {
				t.Fatal(err)
			}
			b, per := decodeLoad(t, l)
			if diff := cmp.Diff(tt.want, per); diff != "" {
				t.Fatalf("records per message (-want +got):\n%s", diff)
			}
			v := newVerifier([]*load{{}, l}, sigs)
			v.t.metadata = 1
			v.Consume(context.Background(), b)
			got := v.finish()
			if err := got.err(); err != nil || got.distinct != int64(tt.n) || got.duplicates != 0 {
				t.Fatalf("tally %+v: %v", got, err)
			}
		})
	}
}

func TestVerifierCounts(t *testing.T) {
	cat := record.Builtin()
	sigs := benchkit.Signatures()
	l, err := newLoad(0, 40, 1, cat, sigs)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(b *record.Batch)
		want   tally // first is compared by substring below
		first  string
	}{
		{"all", func(*record.Batch) {}, tally{records: 40, distinct: 40, metadata: 1}, ""},
		{"duplicates", func(b *record.Batch) {
			b.Records = append(b.Records, b.Records[3], b.Records[3], b.Records[0])
		}, tally{records: 43, distinct: 40, duplicates: 3, metadata: 1}, ""},
		{"reordered", func(b *record.Batch) {
			b.Records[0], b.Records[39] = b.Records[39], b.Records[0]
		}, tally{records: 40, distinct: 40, metadata: 1}, ""},
		{"missing", func(b *record.Batch) { b.Records = b.Records[:37] }, tally{records: 37, distinct: 37, missing: 3, metadata: 1}, ""},
		{"changed signature", func(b *record.Batch) { b.Records[5].Values[3] = record.StringValue("x") },
			tally{records: 40, distinct: 39, missing: 1, bad: 1, metadata: 1}, "publisher 0, event 5:"},
		{"unknown publisher", func(b *record.Batch) { b.Records[0].Values[1] = record.IntValue(7 << benchkit.TraceShift) },
			tally{records: 40, distinct: 39, missing: 1, bad: 1, metadata: 1}, "names no publisher"},
		{"unknown orderIndex", func(b *record.Batch) { b.Records[0].Values[2] = record.IntValue(999) },
			tally{records: 40, distinct: 39, missing: 1, bad: 1, metadata: 1}, "no orderIndex 999"},
		{"logging timestamp", func(b *record.Batch) { b.Records[1].LoggingTimestamp = 5 },
			tally{records: 40, distinct: 39, missing: 1, bad: 1, metadata: 1}, "publisher 0, event 1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := decodeLoad(t, l)
			tt.change(b)
			v := newVerifier([]*load{l}, sigs)
			v.t.metadata = 1
			v.Consume(context.Background(), b)
			got := v.finish()
			if tt.first == "" && got.first != nil || tt.first != "" && (got.first == nil || !strings.Contains(got.first.Error(), tt.first)) {
				t.Fatalf("first error %v, want one containing %q", got.first, tt.first)
			}
			got.first = nil
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(tally{})); diff != "" {
				t.Fatalf("tally (-want +got):\n%s", diff)
			}
			if wantErr := tt.want.missing > 0 || tt.want.bad > 0; (got.err() != nil) != wantErr {
				t.Fatalf("err() = %v, want an error: %v", got.err(), wantErr)
			}
		})
	}
}

// TestReceiverConfig checks that every path's configuration is one serve
// accepts.
func TestReceiverConfig(t *testing.T) {
	o := &options{stompURL: "stomp://127.0.0.1:61613", stompUser: "guest", stompPassword: `p"w\d`, vhost: "/"}
	for _, path := range allPaths {
		t.Run(path, func(t *testing.T) {
			y := "receivers:\n  - name: in\n" + receiverConfig(path, o, "/queue/q") + "sinks:\n  - type: kieker-log\n"
			c, err := config.Parse([]byte(y))
			if err != nil {
				t.Fatalf("%v\n%s", err, y)
			}
			if err := c.Normalize(); err != nil {
				t.Fatal(err)
			}
			r := c.Receivers[0]
			f := serve.DefaultFactories().Receiver(r.Type)
			if f == nil {
				t.Fatalf("unknown receiver type %q", r.Type)
			}
			pc := f.NewConfig()
			if err := r.Decode(pc); err != nil {
				t.Fatalf("%v\n%s", err, y)
			}
			if err := pc.Validate(); err != nil {
				t.Fatalf("%v\n%s", err, y)
			}
			if sc, ok := pc.(*stomp.FactoryConfig); path == pathSTOMP && (!ok || sc.Password != o.stompPassword || sc.Destination != "/queue/q" || sc.URL != o.stompURL) {
				t.Fatalf("stomp receiver %+v", pc)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	def := options{records: 100_000, baseline: 1_000_000, perMsg: 1, publishers: 2, paths: allPaths,
		stompURL: "stomp://127.0.0.1:61613", stompUser: "guest", stompPassword: "guest", vhost: "/"}
	tests := []struct {
		args    []string
		wantErr bool
		want    func(o *options)
	}{
		{nil, false, func(*options) {}},
		{[]string{"-per-message", "100", "-records", "1000000", "-paths", "stomp, embedded,stomp", "-publishers", "4"}, false,
			func(o *options) {
				o.perMsg, o.records, o.paths, o.publishers = 100, 1_000_000, []string{"stomp", "embedded"}, 4
			}},
		{[]string{"-publishers", "0"}, true, nil},
		{[]string{"-per-message", "0"}, true, nil},
		{[]string{"-records", "1", "-publishers", "2"}, true, nil},
		{[]string{"-paths", "kdb-tcp,mqtt"}, true, nil},
		{[]string{"-paths", ","}, true, nil},
		{[]string{"extra"}, true, nil},
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
			want := def
			want.paths = append([]string(nil), def.paths...)
			tt.want(&want)
			if diff := cmp.Diff(want, *o, cmp.AllowUnexported(options{})); diff != "" {
				t.Fatalf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunSmall runs the whole benchmark on a few records over every path:
// it builds and starts the real bridge and needs RabbitMQ's STOMP plugin.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tracebridge serve")
	}
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	o, err := parseFlags([]string{"-records", "3001", "-baseline-records", "5000", "-per-message", "7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), o, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	for _, row := range []string{
		`kdb-tcp +- +5000 +- +[0-9.]+ +\d+ +1\.000 .* 5000 +0 +0 `,
		`stomp +7 +3001 +430 +[0-9.]+ +\d+ +[0-9.]+ .* 3001 +0 +0 `,
		`embedded +7 +3001 +430 .* 3001 +0 +0 `,
		`embedded-js +7 +3001 +430 .* 3001 +0 +0 `,
	} {
		if !regexp.MustCompile(`(?m)^ *` + row).MatchString(stdout.String()) {
			t.Errorf("no row matching %q in\n%s", row, &stdout)
		}
	}
}
