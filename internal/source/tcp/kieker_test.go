package tcp

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

var streamCounts = []struct {
	file   string
	total  int
	counts map[string]int
}{
	{"java-tcp.bin", 404, map[string]int{"KiekerMetadataRecord": 1, "ApplicationTraceMetadata": 31,
		"BeforeOperationEvent": 186, "AfterOperationEvent": 180, "AfterOperationFailedEvent": 6}},
	{"java-tcp-lts.bin", 404, map[string]int{"KiekerMetadataRecord": 1, "ApplicationTraceMetadata": 31,
		"BeforeOperationEvent": 186, "AfterOperationEvent": 180, "AfterOperationFailedEvent": 6}},
	{"python-tcp.bin", 375, map[string]int{"TraceMetadata": 25, "BeforeOperationEvent": 175,
		"AfterOperationEvent": 170, "AfterOperationFailedEvent": 5}},
	{"c-tcp.bin", 326, map[string]int{"TraceMetadata": 25, "BeforeOperationEvent": 150,
		"AfterOperationEvent": 145, "AfterOperationFailedEvent": 5, "CPUUtilizationRecord": 1}},
	{"c-gccprof-tcp.bin", 33, map[string]int{"TraceMetadata": 1, "BeforeOperationEvent": 16, "AfterOperationEvent": 16}},
	{"c-basic-example.bin", 25, map[string]int{"TraceMetadata": 1, "BeforeOperationEvent": 12, "AfterOperationEvent": 12}},
}

// TestKiekerStreams sends every captured single-socket stream to a server,
// whole and in random 1–13-byte pieces, and checks that every record
// arrives, identical to decoding the file in one go.
func TestKiekerStreams(t *testing.T) {
	for _, tt := range streamCounts {
		data := corpus(t, "kieker-streams", tt.file)
		want, _, err := decodeKieker(t, data)
		if err != nil {
			t.Fatalf("%s: reference decode: %v", tt.file, err)
		}
		for _, how := range []string{"whole", "pieces-1", "pieces-2"} {
			t.Run(tt.file+"/"+how, func(t *testing.T) {
				e := start(t, Config{NewDecoder: KiekerDecoder(kieker.Options{})}, nil)
				c := dial(t, e.r.Addr())
				switch how {
				case "whole":
					if _, err := c.Write(data); err != nil {
						t.Fatal(err)
					}
				case "pieces-1":
					sendPieces(t, c, data, 1)
				case "pieces-2":
					sendPieces(t, c, data, 2)
				}
				c.Close()
				got := e.col.wait(t, tt.total, 10*time.Second)
				waitFor(t, "the connection to close", 5*time.Second, func() bool { return e.r.Stats().Open == 0 })
				if diff := cmp.Diff(recStrings(want), recStrings(e.col.records())); diff != "" {
					t.Errorf("records differ from a whole-file decode (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.counts, countTypes(got)); diff != "" {
					t.Errorf("record counts (-want +got):\n%s", diff)
				}
				st := e.r.Stats()
				if st.DecodeErrors != 0 || st.Bytes != int64(len(data)) || st.Records != int64(tt.total) {
					t.Errorf("stats %+v, want no decode error, %d bytes, %d records", st, len(data), tt.total)
				}
				if err := e.stop(t); err != nil {
					t.Fatal(err)
				}
				if n := e.counter(t, "tracebridge_records_received_total"); n != float64(tt.total) {
					t.Errorf("records metric %v, want %d", n, tt.total)
				}
				if n := e.counter(t, "tracebridge_bytes_received_total"); n != float64(len(data)) {
					t.Errorf("bytes metric %v, want %d", n, len(data))
				}
			})
		}
	}
}

// TestKiekerUnicodeStream: Kieker's Java writer mis-frames non-ASCII
// strings; the connection gets a logged, counted error naming peer and
// offset, and the server keeps serving the other clients.
func TestKiekerUnicodeStream(t *testing.T) {
	bad := corpus(t, "kieker-streams", "java-tcp-unicode.bin")
	good := corpus(t, "kieker-streams", "java-tcp.bin")
	badRecs, badOff, badErr := decodeKieker(t, bad)
	if badErr == nil {
		t.Fatal("reference decode of the unicode stream succeeded")
	}
	e := start(t, Config{Name: "kieker", NewDecoder: KiekerDecoder(kieker.Options{})}, nil)

	// A good client that is in the middle of its stream while the bad one
	// fails, and one that connects afterwards.
	early := dial(t, e.r.Addr())
	half := len(good) / 2
	sendPieces(t, early, good[:half], 3)

	c := dial(t, e.r.Addr())
	if _, err := c.Write(bad); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c, 5*time.Second)
	waitFor(t, "the decode error to be counted", 5*time.Second, func() bool { return e.r.Stats().DecodeErrors == 1 })

	sendPieces(t, early, good[half:], 4)
	early.Close()
	late := dial(t, e.r.Addr())
	if _, err := late.Write(good); err != nil {
		t.Fatal(err)
	}
	late.Close()
	got := e.col.wait(t, len(badRecs)+2*404, 10*time.Second)
	waitFor(t, "all connections to close", 5*time.Second, func() bool { return e.r.Stats().Open == 0 })
	if len(got) != len(badRecs)+2*404 {
		t.Errorf("%d records, want %d", len(got), len(badRecs)+2*404)
	}

	lines := e.logs.lines(t, "malformed stream")
	if len(lines) != 1 {
		t.Fatalf("%d malformed-stream log lines, want 1", len(lines))
	}
	l := lines[0]
	if l["receiver"] != "kieker" || l["peer"] != c.LocalAddr().String() || l["offset"] != float64(badOff) {
		t.Errorf("log line %v: want receiver kieker, peer %s, offset %d", l, c.LocalAddr(), badOff)
	}
	if msg, _ := l["err"].(string); !strings.Contains(msg, "JavaCharCount") || !strings.Contains(msg, "offset ") {
		t.Errorf("error %q does not name the offset and the Java char-count cause", msg)
	}
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := e.counter(t, "tracebridge_decode_errors_total"); n != 1 {
		t.Errorf("decode error metric %v, want 1", n)
	}
}

// TestKiekerLimits: a registry entry over the configured string limit is an
// error of that connection only.
func TestKiekerLimits(t *testing.T) {
	e := start(t, Config{NewDecoder: KiekerDecoder(kieker.Options{MaxStringLen: 64})}, nil)
	c := dial(t, e.r.Addr())
	long := kieker.AppendRegistryEntry(nil, 0, strings.Repeat("x", 65), true)
	if _, err := c.Write(long); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c, 5*time.Second)
	good := corpus(t, "kieker-streams", "c-basic-example.bin")
	g := dial(t, e.r.Addr())
	if _, err := g.Write(good); err != nil {
		t.Fatal(err)
	}
	g.Close()
	e.col.wait(t, 25, 5*time.Second)
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
	lines := e.logs.lines(t, "malformed stream")
	if len(lines) != 1 || !strings.Contains(lines[0]["err"].(string), "over the limit 64") {
		t.Errorf("log lines %v, want one naming the limit", lines)
	}
}

func TestKiekerMaxUnit(t *testing.T) {
	d := KiekerDecoder(kieker.Options{})()
	// The largest unit is a registry entry of the longest string.
	if got, want := d.MaxUnit(), 12+kieker.DefaultMaxStringLen; got != want {
		t.Errorf("MaxUnit %d, want %d", got, want)
	}
	d = KiekerDecoder(kieker.Options{MaxStringLen: 100, MaxArrayLen: 20})()
	// EntryLevelBeforeOperationObjectEvent: header 12, timestamp, traceId,
	// orderIndex, two strings, objectId, two string arrays, requestType.
	if got, want := d.MaxUnit(), 12+8+8+4+4+4+4+2*(4+20*4)+4; got != want {
		t.Errorf("MaxUnit %d, want %d", got, want)
	}
}

// TestKiekerRegistryBytes: a connection whose registry entries pass
// max_registry_bytes is closed with one log line naming the peer, the offset
// of the entry and the limit, while the other connections of the receiver
// go on delivering; the YAML key reaches the decoders of kieker-tcp and
// kieker-tcp-dual, whose shared registry it bounds.
func TestKiekerRegistryBytes(t *testing.T) {
	const limit = 4096
	var bad []byte
	for id := int32(0); id < 10; id++ {
		bad = kieker.AppendRegistryEntry(bad, id, strings.Repeat("x", 1000), true)
	}
	badOff := 4 * (12 + 1000) // the fifth entry passes the limit
	good := corpus(t, "kieker-streams", "java-tcp.bin")

	e := start(t, Config{Name: "kieker", NewDecoder: KiekerDecoder(kieker.Options{MaxRegistryBytes: limit})}, nil)
	early := dial(t, e.r.Addr())
	half := len(good) / 2
	sendPieces(t, early, good[:half], 3)

	c := dial(t, e.r.Addr())
	c.Write(bad) // the receiver may reset the connection before it took all
	waitClosed(t, c, 5*time.Second)
	waitFor(t, "the decode error to be counted", 5*time.Second, func() bool { return e.r.Stats().DecodeErrors == 1 })

	sendPieces(t, early, good[half:], 4)
	early.Close()
	late := dial(t, e.r.Addr())
	if _, err := late.Write(good); err != nil {
		t.Fatal(err)
	}
	late.Close()
	e.col.wait(t, 2*404, 10*time.Second)
	waitFor(t, "all connections to close", 5*time.Second, func() bool { return e.r.Stats().Open == 0 })
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := e.col.len(); n != 2*404 {
		t.Errorf("%d records, want %d", n, 2*404)
	}
	lines := e.logs.lines(t, "connection closed")
	var faults []map[string]any
	for _, l := range lines {
		if l["level"] != "DEBUG" {
			faults = append(faults, l)
		}
	}
	if len(faults) != 1 {
		t.Fatalf("%d fault lines %v, want 1", len(faults), faults)
	}
	l := faults[0]
	if l["receiver"] != "kieker" || l["peer"] != c.LocalAddr().String() || l["offset"] != float64(badOff) {
		t.Errorf("log line %v: want receiver kieker, peer %s, offset %d", l, c.LocalAddr(), badOff)
	}
	if msg, _ := l["err"].(string); !strings.Contains(msg, fmt.Sprintf("offset %d:", badOff)) ||
		!strings.Contains(msg, "exceed the limit 4096 (max_registry_bytes)") {
		t.Errorf("error %q does not name the offset and the limit", msg)
	}

	// The YAML key reaches the decoders.
	entries := bad[:badOff+12+1000]
	for _, typ := range []string{TypeKieker, TypeKiekerDual, TypeClient} {
		var f pipeline.ReceiverFactory
		for _, x := range Factories() {
			if x.Type() == typ {
				f = x
			}
		}
		var cfg pipeline.Config
		switch typ {
		case TypeKieker:
			cfg = &KiekerConfig{Listen: "127.0.0.1:0", MaxRegistryBytes: limit}
		case TypeKiekerDual:
			cfg = &DualConfig{Listen: "127.0.0.1:0", RegistryListen: "127.0.0.1:0", MaxRegistryBytes: limit}
		case TypeClient:
			cfg = &ClientConfig{Connect: "127.0.0.1:1", Format: "kieker", MaxRegistryBytes: limit}
		}
		r, err := f.NewReceiver(cfg, pipeline.Settings{Name: typ, Catalog: record.Builtin()})
		if err != nil {
			t.Fatal(err)
		}
		rc := r.(*built).Receiver
		var dec Decoder
		data := entries
		if typ == TypeKiekerDual {
			dec = rc.dual.entries()
			data = nil
			for id := int32(0); id < 5; id++ {
				data = kieker.AppendRegistryEntry(data, id, strings.Repeat("x", 1000), false)
			}
		} else {
			dec = rc.cfg.NewDecoder()
		}
		n, err := dec.Decode(data, &record.Batch{})
		if !errors.Is(err, kieker.ErrLimit) || !strings.Contains(err.Error(), "max_registry_bytes") || n >= len(data) {
			t.Errorf("%s: decoded %d of %d bytes, error %v; want the limit error", typ, n, len(data), err)
		}
		rc.Close()
	}
}
