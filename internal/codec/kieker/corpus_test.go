package kieker

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
)

// checkChunking decodes data whole, byte by byte and in random chunks of
// 1–13 bytes and fails unless all give the same records, error and offset.
func checkChunking(t *testing.T, newDecoder func() *Decoder, data []byte) result {
	t.Helper()
	want := feedBinary(newDecoder(), data, whole)
	chunkings := map[string]chunker{"one byte": oneByte}
	for seed := uint64(1); seed <= 3; seed++ {
		chunkings["random "+itoa(int64(seed))] = randomChunks(seed, 13)
	}
	for name, next := range chunkings {
		got := feedBinary(newDecoder(), data, next)
		if diff := cmp.Diff(recStrings(want.recs), recStrings(got.recs)); diff != "" {
			t.Errorf("%s: records differ from whole input (-whole +chunked):\n%s", name, diff)
		}
		if want.errString() != got.errString() || want.off != got.off || want.pending != got.pending {
			t.Errorf("%s: got error %q at offset %d (pending %v), whole input gave %q at %d (pending %v)",
				name, got.errString(), got.off, got.pending, want.errString(), want.off, want.pending)
		}
	}
	return want
}

func TestBinaryLogs(t *testing.T) {
	tests := []struct {
		name      string
		counts    map[string]int
		metaIndex int // position of the KiekerMetadataRecord
	}{
		{"kieker-1.10-binary-event-trace", map[string]int{"KiekerMetadataRecord": 1, "TraceMetadata": 100,
			"BeforeOperationEvent": 396, "AfterOperationEvent": 389, "AfterOperationFailedEvent": 7}, 1},
		{"kieker-1.13-binary-callobject", map[string]int{"KiekerMetadataRecord": 1, "TraceMetadata": 4,
			"CallOperationObjectEvent": 7}, 0},
		{"kieker-2.0-binary-event-trace", map[string]int{"KiekerMetadataRecord": 1, "ApplicationTraceMetadata": 31,
			"BeforeOperationEvent": 186, "AfterOperationEvent": 180, "AfterOperationFailedEvent": 6}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := logDir(t, tt.name)
			strs := loadMap(t, dir)
			data := readFile(t, dataFile(t, dir, ".bin"))
			res := checkChunking(t, func() *Decoder { return NewDecoder(Options{Strings: strs}) }, data)
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.off != int64(len(data)) || res.pending {
				t.Errorf("consumed %d of %d bytes (pending %v), want all", res.off, len(data), res.pending)
			}
			if diff := cmp.Diff(tt.counts, countTypes(res.recs)); diff != "" {
				t.Errorf("record counts (-want +got):\n%s", diff)
			}
			if got := res.recs[tt.metaIndex].Type.Name; got != record.KiekerMetadataRecord {
				t.Errorf("record %d is %s, want the metadata record", tt.metaIndex, got)
			}
		})
	}
}

func TestBinaryLogValues(t *testing.T) {
	dir := logDir(t, "kieker-1.13-binary-callobject")
	d := NewDecoder(Options{Strings: loadMap(t, dir)})
	res := feedBinary(d, readFile(t, dataFile(t, dir, ".bin")), whole)
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := `KiekerMetadataRecord@1587978523466865100{version="1.13", controllerName="KIEKER", hostname="DESKTOP-RBHO8OA", experimentId=1, debugMode=false, timeOffset=0, timeUnit="NANOSECONDS", numberOfRecords=0}`
	if got := recString(&res.recs[0]); got != want {
		t.Errorf("first record\n got %s\nwant %s", got, want)
	}
	call := res.recs[2]
	if call.Type.Name != record.Prefix+"flow.trace.operation.object.CallOperationObjectEvent" {
		t.Fatalf("record 2 is %s", call.Type.Name)
	}
	for _, f := range []string{"operationSignature", "classSignature", "calleeOperationSignature", "calleeClassSignature"} {
		if v, _ := call.Field(f); !strings.Contains(v.Str(), "org.kieker.metrics.sample") {
			t.Errorf("%s = %q", f, v.Str())
		}
	}
}

func TestStreams(t *testing.T) {
	tests := []struct {
		file   string
		counts map[string]int
		check  func(t *testing.T, d *Decoder, recs []record.Record)
	}{
		{"java-tcp.bin", map[string]int{"KiekerMetadataRecord": 1, "ApplicationTraceMetadata": 31,
			"BeforeOperationEvent": 186, "AfterOperationEvent": 180, "AfterOperationFailedEvent": 6},
			func(t *testing.T, d *Decoder, recs []record.Record) {
				for i := range recs {
					if recs[i].LoggingTimestamp != record.NoTimestamp {
						t.Fatalf("record %d has logging timestamp %d, want -1", i, recs[i].LoggingTimestamp)
					}
				}
				if s, _ := d.Strings().Get(0); s != record.KiekerMetadataRecord {
					t.Errorf("id 0 = %q", s)
				}
			}},
		{"java-tcp-lts.bin", map[string]int{"KiekerMetadataRecord": 1, "ApplicationTraceMetadata": 31,
			"BeforeOperationEvent": 186, "AfterOperationEvent": 180, "AfterOperationFailedEvent": 6},
			func(t *testing.T, d *Decoder, recs []record.Record) {
				for i := range recs {
					if recs[i].LoggingTimestamp <= 0 {
						t.Fatalf("record %d has logging timestamp %d, want one set", i, recs[i].LoggingTimestamp)
					}
				}
			}},
		{"python-tcp.bin", map[string]int{"TraceMetadata": 25, "BeforeOperationEvent": 175,
			"AfterOperationEvent": 170, "AfterOperationFailedEvent": 5},
			func(t *testing.T, d *Decoder, recs []record.Record) {
				if _, ok := d.Strings().Get(0); ok {
					t.Error("the Python pack starts ids at 1, but id 0 is registered")
				}
				if v, _ := recs[0].Field("hostname"); v.Str() != "<default-host>" {
					t.Errorf("hostname %q", v.Str())
				}
			}},
		{"c-tcp.bin", map[string]int{"TraceMetadata": 25, "BeforeOperationEvent": 150,
			"AfterOperationEvent": 145, "AfterOperationFailedEvent": 5, "CPUUtilizationRecord": 1},
			func(t *testing.T, d *Decoder, recs []record.Record) {
				v, _ := recs[0].Field("parentOrderId")
				p, _ := recs[0].Field("parentTraceId")
				if v.Int() != 0 || p.Int() != -1 {
					t.Errorf("C root trace parentTraceId %d parentOrderId %d, want -1 and 0", p.Int(), v.Int())
				}
			}},
		{"c-gccprof-tcp.bin", map[string]int{"TraceMetadata": 1, "BeforeOperationEvent": 16, "AfterOperationEvent": 16}, nil},
		{"c-basic-example.bin", map[string]int{"TraceMetadata": 1, "BeforeOperationEvent": 12, "AfterOperationEvent": 12}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data := corpus(t, "kieker-streams", tt.file)
			var last *Decoder
			res := checkChunking(t, func() *Decoder { last = NewDecoder(Options{Inline: true}); return last }, data)
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.off != int64(len(data)) || res.pending {
				t.Errorf("consumed %d of %d bytes (pending %v)", res.off, len(data), res.pending)
			}
			if diff := cmp.Diff(tt.counts, countTypes(res.recs)); diff != "" {
				t.Errorf("record counts (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				d := NewDecoder(Options{Inline: true})
				feedBinary(d, data, whole)
				tt.check(t, d, res.recs)
			}
		})
	}
}

// TestJavaUnicodeStream: Kieker's Java SingleSocketTcpWriter sends the
// UTF-16 char count as the length of UTF-8 bytes; the decoder must say so
// clearly, and decode the stream with JavaCharCount.
func TestJavaUnicodeStream(t *testing.T) {
	data := corpus(t, "kieker-streams", "java-tcp-unicode.bin")

	res := checkChunking(t, func() *Decoder { return NewDecoder(Options{Inline: true}) }, data)
	if res.err == nil {
		t.Fatal("no error for Java's mis-framed stream")
	}
	for _, want := range []string{"offset 814", "id 16", "not valid UTF-8", "UTF-16 char count", "JavaCharCount"} {
		if !strings.Contains(res.err.Error(), want) {
			t.Errorf("error %q does not mention %q", res.err, want)
		}
	}
	if !errors.Is(res.err, ErrJavaCharCount) || !errors.Is(res.err, ErrMalformed) {
		t.Errorf("error %v is not ErrJavaCharCount and ErrMalformed", res.err)
	}
	var e *Error
	if !errors.As(res.err, &e) || e.Offset != 814 || res.off != 814 || !res.pending {
		t.Errorf("error %#v, offset %d, pending %v: want offset 814 and the rest pending", e, res.off, res.pending)
	}
	// The records before the bad entry are kept: those of the prefix.
	prefix := feedBinary(NewDecoder(Options{Inline: true}), data[:814], whole)
	if diff := cmp.Diff(recStrings(prefix.recs), recStrings(res.recs)); diff != "" {
		t.Errorf("records before the error (-prefix +got):\n%s", diff)
	}

	fixed := checkChunking(t, func() *Decoder { return NewDecoder(Options{Inline: true, JavaCharCount: true}) }, data)
	if fixed.err != nil || fixed.off != int64(len(data)) {
		t.Fatalf("with JavaCharCount: %v after %d of %d bytes", fixed.err, fixed.off, len(data))
	}
	wantCounts := map[string]int{"KiekerMetadataRecord": 1, "ApplicationTraceMetadata": 10,
		"BeforeOperationEvent": 60, "AfterOperationEvent": 58, "AfterOperationFailedEvent": 2}
	if diff := cmp.Diff(wantCounts, countTypes(fixed.recs)); diff != "" {
		t.Errorf("record counts (-want +got):\n%s", diff)
	}
	var causes []string
	for i := range fixed.recs {
		if v, ok := fixed.recs[i].Field("cause"); ok {
			causes = append(causes, v.Str())
		}
	}
	want := []string{
		"java.lang.IllegalArgumentException: ungültige Anfrage – 4",
		"java.lang.IllegalArgumentException: ungültige Anfrage – 9",
	}
	if diff := cmp.Diff(want, causes); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
}

// javaEntry writes a registry entry as Kieker's Java writer does: the
// UTF-16 char count as the length.
func javaEntry(dst []byte, id int32, s string) []byte {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	dst = append(dst, 0xFF, 0xFF, 0xFF, 0xFF)
	dst = append(dst, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
	dst = append(dst, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	return append(dst, s...)
}

// TestJavaCharCountHint: when the count cuts the text at a character
// boundary the entry is valid UTF-8, and the frame after it fails; the
// error names the likely cause.
func TestJavaCharCountHint(t *testing.T) {
	var data []byte
	enc := NewEncoder(EncoderOptions{Inline: true})
	cat := record.Builtin()
	split := cat.Lookup(record.SplitEvent)
	r := record.Record{Type: split, LoggingTimestamp: 5, Values: []record.Value{record.IntValue(1), record.IntValue(2), record.IntValue(3)}}
	data, _ = enc.Append(data, &r)
	before := len(data)
	// "ü" is 2 bytes and 1 char: Java's length cuts "ü-abc" after "ü-ab".
	data = javaEntry(data, 1, "ü-abc")
	data = append(data, 0, 0, 0, 0) // frame: class id 0 (SplitEvent) …
	data = append(data, make([]byte, 8+8+8+4)...)

	res := checkChunking(t, func() *Decoder { return NewDecoder(Options{Inline: true}) }, data)
	if res.err == nil {
		t.Fatal("no error")
	}
	msg := res.err.Error()
	for _, want := range []string{"offset " + itoa(int64(before)+17), "registry entry for id 1 at offset " + itoa(int64(before)), "UTF-16 char count", "JavaCharCount"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if !errors.Is(res.err, ErrJavaCharCount) || !errors.Is(res.err, ErrUnknownString) {
		t.Errorf("error %v: want ErrJavaCharCount and ErrUnknownString", res.err)
	}
	if len(res.recs) != 1 {
		t.Errorf("%d records before the error, want 1", len(res.recs))
	}
	ok := checkChunking(t, func() *Decoder { return NewDecoder(Options{Inline: true, JavaCharCount: true}) }, data)
	if ok.err != nil || len(ok.recs) != 2 {
		t.Fatalf("with JavaCharCount: %d records, %v", len(ok.recs), ok.err)
	}
	// A correct (byte length) non-ASCII entry followed by a good frame is fine.
	failed := cat.Lookup(record.AfterOperationFailedEvent)
	fr := record.Record{Type: failed, LoggingTimestamp: 1, Values: []record.Value{record.IntValue(1), record.IntValue(2),
		record.IntValue(3), record.StringValue("op"), record.StringValue("cls"), record.StringValue("ünïcödé 😀")}}
	enc2 := NewEncoder(EncoderOptions{Inline: true})
	good, _ := enc2.Append(nil, &fr)
	good, _ = enc2.Append(good, &r)
	if res := feedBinary(NewDecoder(Options{Inline: true}), good, whole); res.err != nil || len(res.recs) != 2 {
		t.Errorf("byte-length stream: %d records, %v", len(res.recs), res.err)
	}
}

func TestASCIILogs(t *testing.T) {
	tests := []struct {
		name   string
		counts map[string]int
		check  func(t *testing.T, recs []record.Record)
	}{
		{"kieker-1.8-ascii-operationexecution", map[string]int{"KiekerMetadataRecord": 1, "OperationExecutionRecord": 10},
			func(t *testing.T, recs []record.Record) {
				want := `OperationExecutionRecord@1378814632852360525{operationSignature="public void kieker.examples.userguide.ch2bookstore.manual.Catalog.getBook(boolean)", sessionId="<no-session-id>", traceId=-1, tin=1378814632849896821, tout=1378814632852105483, hostname="myHost", eoi=-1, ess=-1}`
				if got := recString(&recs[1]); got != want {
					t.Errorf("\n got %s\nwant %s", got, want)
				}
			}},
		{"kieker-1.10-ascii-event-trace", map[string]int{"KiekerMetadataRecord": 1, "TraceMetadata": 1,
			"BeforeOperationEvent": 52, "AfterOperationEvent": 52}, nil},
		{"kieker-1.14-ascii-system-metrics", map[string]int{"KiekerMetadataRecord": 1, "CPUUtilizationRecord": 1,
			"MemSwapUsageRecord": 1, "DiskUsageRecord": 1, "NetworkUtilizationRecord": 1, "LoadAverageRecord": 1},
			func(t *testing.T, recs []record.Record) {
				for i := range recs {
					if recs[i].Type.ShortName() != "DiskUsageRecord" {
						continue
					}
					if v, _ := recs[i].Field("deviceName"); v.Str() != `C:\\` {
						t.Errorf("deviceName %q (%d chars), want the 4 characters C:\\\\", v.Str(), len(v.Str()))
					}
					if v, _ := recs[i].Field("writeBytesPerSecond"); v.Double() != 2472576 {
						t.Errorf("writeBytesPerSecond %v", v.Double())
					}
				}
			}},
		{"kieker-1.15-ascii-applicationtracemetadata-teastore", map[string]int{"KiekerMetadataRecord": 1,
			"ApplicationTraceMetadata": 2, "BeforeOperationEvent": 13, "AfterOperationEvent": 8, "AfterOperationFailedEvent": 5},
			func(t *testing.T, recs []record.Record) {
				for i := range recs {
					if recs[i].Type.ShortName() == "ApplicationTraceMetadata" {
						if v, _ := recs[i].Field("applicationName"); v.Str() != "" {
							t.Errorf("applicationName %q, want empty", v.Str())
						}
						if v, _ := recs[i].Field("parentOrderId"); v.Int() != -1 {
							t.Errorf("parentOrderId %d", v.Int())
						}
					}
				}
			}},
		{"kieker-2.0-ascii-event-trace", map[string]int{"KiekerMetadataRecord": 1, "ApplicationTraceMetadata": 31,
			"BeforeOperationEvent": 186, "AfterOperationEvent": 180, "AfterOperationFailedEvent": 6}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := logDir(t, tt.name)
			strs := loadMap(t, dir)
			data := readFile(t, dataFile(t, dir, ".dat"))
			want := feedText(NewTextDecoder(TextOptions{Strings: strs}), data, whole)
			if want.err != nil {
				t.Fatal(want.err)
			}
			for seed := uint64(0); seed < 3; seed++ {
				next := randomChunks(seed, 13)
				if seed == 0 {
					next = oneByte
				}
				got := feedText(NewTextDecoder(TextOptions{Strings: strs}), data, next)
				if diff := cmp.Diff(recStrings(want.recs), recStrings(got.recs)); diff != "" || got.err != nil {
					t.Errorf("chunking %d: %v, records (-whole +chunked):\n%s", seed, got.err, diff)
				}
			}
			if diff := cmp.Diff(tt.counts, countTypes(want.recs)); diff != "" {
				t.Errorf("record counts (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				tt.check(t, want.recs)
			}
		})
	}
}

// TestASCIIReencode: writing the records of a Kieker ASCII log with the
// same type ids reproduces its .dat file byte for byte (the ≥1.13 logs the
// brief names, and the older ones too).
func TestASCIIReencode(t *testing.T) {
	for _, name := range []string{
		"kieker-1.14-ascii-system-metrics",
		"kieker-1.15-ascii-applicationtracemetadata-teastore",
		"kieker-2.0-ascii-event-trace",
		"kieker-1.10-ascii-event-trace",
		"kieker-1.8-ascii-operationexecution",
	} {
		t.Run(name, func(t *testing.T) {
			dir := logDir(t, name)
			strs := loadMap(t, dir)
			data := readFile(t, dataFile(t, dir, ".dat"))
			ids := map[string]int32{}
			for id, s := range strs.All() {
				ids[s] = id
			}
			lines := strings.SplitAfter(string(data), "\n")
			ld := NewLineDecoder(TextOptions{Strings: strs})
			var b record.Batch
			for i, line := range lines {
				if line == "" {
					continue
				}
				b.Reset()
				if err := ld.Decode([]byte(strings.TrimSuffix(line, "\n")), i+1, &b); err != nil {
					t.Fatal(err)
				}
				r := &b.Records[0]
				if got := string(AppendLine(nil, ids[r.Type.Name], r)); got != line {
					t.Errorf("line %d:\n got %q\nwant %q", i+1, got, line)
				}
			}
		})
	}
}
