package jfr

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
	"github.com/tracebridge/tracebridge/internal/record"
)

func TestMain(m *testing.M) {
	code := m.Run()
	workload.Remove()
	os.Exit(code)
}

// workload is recorded once per test binary: three seconds, 1 MB chunks
// (so several chunks and chunk rotations).
var workload = jfrtest.Shared{Options: jfrtest.Options{Seconds: 3, MaxChunkSize: "1M", RunID: "oracle"}}

// decoded is what the reader made of one chunk.
type decoded struct {
	records []record.Record
}

// columnsOf remembers how the fields of each record type were derived.
var columnsOf = map[*record.Type][]column{}

// readFile decodes every chunk of a file with the codec alone.
func readFile(t testing.TB, path string, o Options) ([]decoded, *Stream) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	s := NewStream(o)
	var out []decoded
	last := int64(-1)
	readChunks(s, f, st.Size(), 512, func(off int64, b *record.Batch) {
		if off != last {
			out = append(out, decoded{})
			last = off
		}
		d := &out[len(out)-1]
		for i := range b.Records {
			d.records = append(d.records, b.Records[i].Clone())
			if _, ok := columnsOf[b.Records[i].Type]; !ok {
				columnsOf[b.Records[i].Type] = s.columns(b.Records[i].Type)
			}
		}
	}, func(off int64, err error) { t.Errorf("chunk at %d: %v", off, err) })
	return out, s
}

func TestCountsMatchJFRSummary(t *testing.T) {
	tools, path := workload.Get(t)
	want, chunks, err := tools.Summary(path)
	if err != nil {
		t.Fatal(err)
	}
	dec, s := readFile(t, path, Options{})
	got := map[string]int64{}
	for _, d := range dec {
		for _, r := range d.records {
			got[r.Type.Name]++
		}
	}
	st := s.Stats()
	if st.Metadata > 0 {
		got["jdk.Metadata"] = st.Metadata
	}
	if st.Checkpoints > 0 {
		got["jdk.CheckPoint"] = st.Checkpoints
		if _, ok := want["jdk.Checkpoint"]; ok { // JDK 21 and later
			got["jdk.Checkpoint"] = st.Checkpoints
			delete(got, "jdk.CheckPoint")
		}
	}
	if len(dec) != chunks {
		t.Errorf("read %d chunks, jfr summary says %d", len(dec), chunks)
	}
	var total int64
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d events, jfr summary says %d", name, got[name], n)
		}
		total += n
	}
	for name, n := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %d events, jfr summary has none", name, n)
		}
	}
	if st.BadEvents != 0 || st.Unknown != 0 || st.BadConstants != 0 {
		t.Errorf("stats %+v", st)
	}
	for _, name := range []string{"jdk.ExecutionSample", "jdk.ObjectAllocationSample", "jdk.JavaMonitorEnter", "jdk.ThreadSleep",
		"jdk.JavaExceptionThrow", "jdk.JavaErrorThrow", "jdk.FileWrite", "jdk.FileRead", "shop.Order", "shop.Checkout", "shop.Tick"} {
		if want[name] == 0 {
			t.Errorf("the workload's recording has no %s events", name)
		}
	}
	t.Logf("%d chunks, %d event types, %d events (metadata and checkpoints included) equal jfr summary's counts; stats %+v", chunks, len(want), total, st)
}

func TestValuesMatchJFRPrintJSON(t *testing.T) {
	tools, path := workload.Get(t)
	dec, s := readFile(t, path, Options{})
	// jfr print orders each chunk's events by end time.
	var ours []record.Record
	for _, d := range dec {
		recs := slices.Clone(d.records)
		sort.SliceStable(recs, func(i, j int) bool { return endTime(&recs[i]) < endTime(&recs[j]) })
		ours = append(ours, recs...)
	}
	cmp := newComparer(s)
	i := 0
	err := tools.PrintJSON(context.Background(), path, nil, func(ev jfrtest.Event) error {
		if i >= len(ours) {
			return fmt.Errorf("jfr print has more events than the %d decoded", len(ours))
		}
		r := &ours[i]
		i++
		if r.Type.Name != ev.Type {
			return fmt.Errorf("event %d: %s, jfr print has %s", i-1, r.Type.Name, ev.Type)
		}
		cmp.event(t, r, ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i != len(ours) {
		t.Fatalf("jfr print has %d events, decoded %d", i, len(ours))
	}
	cmp.report(t, s.Stats())
}

func endTime(r *record.Record) int64 {
	end := r.LoggingTimestamp
	if i := r.Type.FieldIndex("duration"); i >= 0 {
		end += r.Values[i].Int()
	}
	return end
}

// comparer checks records against jfr print --json events and counts.
type comparer struct {
	s          *Stream
	events     map[string]int
	values     map[string]int
	diffs      map[string]int // type.field → differences
	nullCP     int            // differences where jfr print shows null for a constant
	shown      int
	fieldsSeen map[string]bool
}

func newComparer(s *Stream) *comparer {
	return &comparer{s: s, events: map[string]int{}, values: map[string]int{}, diffs: map[string]int{}, fieldsSeen: map[string]bool{}}
}

func (c *comparer) event(t *testing.T, r *record.Record, ev jfrtest.Event) {
	cols := columnsOf[r.Type]
	if cols == nil {
		t.Fatalf("no columns for %s", r.Type.Name)
	}
	c.events[r.Type.Name]++
	for k, col := range cols {
		f := r.Type.Fields[k]
		want, null, err := expected(ev.Values, col, f)
		got := r.Values[k]
		c.values[r.Type.Name]++
		if err == nil && got.Equal(want) {
			continue
		}
		if err == nil && null && len(col.path) == 1 {
			c.nullCP++ // a constant jfr print could not resolve (see report)
			if c.nullCP < 10 {
				t.Logf("null in jfr print: %s %s: %s", r.Type.Name, f.Name, show(f, got))
			}
			continue
		}
		key := r.Type.Name + "." + f.Name
		c.diffs[key]++
		if c.diffs[key] <= 3 && c.shown < 40 {
			c.shown++
			if err != nil {
				t.Errorf("%s %s: %v", r.Type.Name, f.Name, err)
			} else {
				t.Errorf("%s %s: got %s, jfr print says %s", r.Type.Name, f.Name, show(f, got), show(f, want))
			}
		}
	}
}

func (c *comparer) report(t *testing.T, st Stats) {
	var total, values int
	for _, n := range c.events {
		total += n
	}
	for _, n := range c.values {
		values += n
	}
	// jfr print resolves constants of an event that began before a chunk
	// rotation and ended after it only when the previous event of its type
	// used the same key (JFR.md §10); this reader looks them up in the
	// previous chunk's pools instead.
	if int64(c.nullCP) > st.Fallbacks {
		t.Errorf("%d values are null in jfr print but resolved here, more than the %d found in a previous chunk's pools", c.nullCP, st.Fallbacks)
	}
	if len(c.diffs) > 0 {
		t.Errorf("differences: %v", c.diffs)
	}
	t.Logf("%d events of %d types, %d field values compared with jfr print --json; %d constants resolved from the previous chunk where jfr print shows null", total, len(c.events), values, c.nullCP)
}

func show(f record.Field, v record.Value) string {
	if f.Array {
		l := v.List()
		if l == nil {
			return "[]"
		}
		var s []string
		for _, it := range l.Items {
			s = append(s, it.Format(f.Kind))
		}
		return "[" + strings.Join(s, " | ") + "]"
	}
	return strconv.Quote(v.Format(f.Kind))
}

// expected derives a column's value from jfr print's JSON: it follows the
// column's path and renders what it finds as the reader does. null reports
// that a JSON null was met on the way.
func expected(values map[string]any, col column, f record.Field) (v record.Value, null bool, err error) {
	var cur any = values
	for i, seg := range col.path {
		obj, ok := cur.(map[string]any)
		if !ok {
			if cur == nil {
				return nullOf(col), true, nil
			}
			if arr, ok := cur.([]any); ok && col.array {
				return expectedArray(arr, col.path[i:], col, f)
			}
			return record.Value{}, false, fmt.Errorf("path %v: %T at %q", col.path, cur, seg)
		}
		next, ok := obj[seg]
		if !ok {
			return record.Value{}, false, fmt.Errorf("path %v: no %q in %v", col.path, seg, keys(obj))
		}
		cur = next
	}
	if col.array && col.render == renderFrame {
		st, ok := cur.(map[string]any)
		if !ok {
			if cur == nil {
				return record.Value{}, true, nil
			}
			return record.Value{}, false, fmt.Errorf("stack trace is %T", cur)
		}
		frames, _ := st["frames"].([]any)
		items := make([]record.Value, 0, len(frames))
		for _, fr := range frames {
			s, err := render1(fr, column{render: renderFrame, kind: record.String})
			if err != nil {
				return record.Value{}, false, err
			}
			items = append(items, s)
		}
		return newList(record.String, items), false, nil
	}
	if col.array {
		arr, _ := cur.([]any)
		return expectedArray(arr, nil, col, f)
	}
	v, err = render1(cur, col)
	return v, cur == nil, err
}

// nullOf is a column's value inside a null object: null for a string
// field, else the zero value.
func nullOf(col column) record.Value {
	if col.kind == record.String && col.render == renderValue && !col.array {
		return record.NullString()
	}
	return record.Value{}
}

func expectedArray(arr []any, rest []string, col column, f record.Field) (record.Value, bool, error) {
	items := make([]record.Value, 0, len(arr))
	for _, el := range arr {
		sub := col
		sub.path = rest
		sub.array = false
		v, _, err := expected(map[string]any{"": el}, column{path: append([]string{""}, rest...), render: col.render, kind: col.kind}, f)
		_ = sub
		if err != nil {
			return record.Value{}, false, err
		}
		items = append(items, v)
	}
	return newList(col.kind, items), false, nil
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// render1 renders one JSON value as the reader renders the column.
func render1(x any, col column) (record.Value, error) {
	switch col.render {
	case renderThreadName:
		if x == nil {
			return record.StringValue(""), nil
		}
		m := x.(map[string]any)
		id, _ := jsonInt(m["javaThreadId"])
		if id > 0 {
			return record.StringValue(str(m["javaName"])), nil
		}
		return record.StringValue(str(m["osName"])), nil
	case renderClass:
		if x == nil {
			return record.StringValue(""), nil
		}
		return record.StringValue(strings.ReplaceAll(str(x.(map[string]any)["name"]), "/", ".")), nil
	case renderMethod:
		return record.StringValue(jsonMethod(x)), nil
	case renderFrame:
		if x == nil {
			return record.StringValue(""), nil
		}
		m := x.(map[string]any)
		line, _ := jsonInt(m["lineNumber"])
		return record.StringValue(string(appendFrame(nil, jsonMethod(m["method"]), line))), nil
	case renderTimestamp:
		if x == nil {
			return record.IntValue(0), nil
		}
		ns, err := parseTimestamp(str(x))
		return record.IntValue(ns), err
	case renderTimespan:
		if x == nil {
			return record.IntValue(0), nil
		}
		ns, err := jfrtest.ParseDuration(str(x))
		return record.IntValue(ns), err
	}
	if x == nil {
		if col.kind == record.Float || col.kind == record.Double {
			return record.Value{}, fmt.Errorf("null number (NaN or infinite)")
		}
		if col.kind == record.String {
			return record.NullString(), nil // null, not ""
		}
		return record.Value{}, nil
	}
	switch col.kind {
	case record.Bool:
		b, ok := x.(bool)
		if !ok {
			return record.Value{}, fmt.Errorf("%v is not a boolean", x)
		}
		return record.BoolValue(b), nil
	case record.String:
		return record.StringValue(str(x)), nil
	case record.Char:
		r := []rune(str(x))
		if len(r) != 1 {
			return record.Value{}, fmt.Errorf("char %q", x)
		}
		return record.IntValue(int64(r[0])), nil
	case record.Float:
		f, err := strconv.ParseFloat(string(x.(json.Number)), 32)
		return record.FloatValue(float32(f)), err
	case record.Double:
		f, err := strconv.ParseFloat(string(x.(json.Number)), 64)
		return record.DoubleValue(f), err
	}
	if col.unsigned {
		// JDK 21 and later print @Unsigned values unsigned; the reader
		// keeps their bits in the declared kind.
		u, err := strconv.ParseUint(string(x.(json.Number)), 10, 64)
		if err == nil {
			return record.IntValue(signExtend(u, col.kind)), nil
		}
	}
	n, err := jsonInt(x)
	return record.IntValue(n), err
}

func signExtend(u uint64, k record.Kind) int64 {
	switch k {
	case record.Byte:
		return int64(int8(u))
	case record.Short:
		return int64(int16(u))
	case record.Int:
		return int64(int32(u))
	case record.Char:
		return int64(uint16(u))
	}
	return int64(u)
}

func jsonInt(x any) (int64, error) {
	n, ok := x.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", x)
	}
	return strconv.ParseInt(string(n), 10, 64)
}

func str(x any) string {
	s, _ := x.(string)
	return s
}

func jsonMethod(x any) string {
	m, ok := x.(map[string]any)
	if !ok {
		return ""
	}
	class := ""
	if typ, ok := m["type"].(map[string]any); ok {
		class = strings.ReplaceAll(str(typ["name"]), "/", ".")
	}
	return string(formatMethod(nil, class, str(m["name"]), str(m["descriptor"])))
}

// parseTimestamp parses Java's OffsetDateTime text; OffsetDateTime.MIN
// is JFR's "no value", Long.MIN_VALUE.
func parseTimestamp(s string) (int64, error) {
	if strings.HasPrefix(s, "-999999999-") {
		return math.MinInt64, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04Z07:00"} {
		if tm, err := time.Parse(layout, s); err == nil {
			return tm.UnixNano(), nil
		}
	}
	return 0, fmt.Errorf("timestamp %q", s)
}

// TestNullStringsMatchJFRPrintJSON: the workload's custom event shop.Order
// has a customer that is null, empty or non-ASCII; each reads as jfr print
// --json shows it (null stays null, not ""), and the JSON lines of `cat
// --json` say the same.
func TestNullStringsMatchJFRPrintJSON(t *testing.T) {
	tools, path := workload.Get(t)
	dec, _ := readFile(t, path, Options{})
	ours := map[string]record.Record{} // by order id
	for _, d := range dec {
		for _, r := range d.records {
			if r.Type.Name == "shop.Order" {
				ours[r.Values[r.Type.FieldIndex("id")].Str()] = r
			}
		}
	}
	kinds := map[string]int{}
	err := tools.PrintJSON(context.Background(), path, []string{"shop.Order"}, func(ev jfrtest.Event) error {
		id := str(ev.Values["id"])
		r, ok := ours[id]
		if !ok {
			return fmt.Errorf("order %s: not decoded", id)
		}
		want := ev.Values["customer"]
		got := r.Values[r.Type.FieldIndex("customer")]
		var line struct{ Fields map[string]any }
		if err := json.Unmarshal(jsonl.AppendRecord(nil, &r), &line); err != nil {
			return err
		}
		asJSON, present := line.Fields["customer"]
		switch {
		case want == nil:
			kinds["null"]++
			if !got.IsNull() || !present || asJSON != nil {
				return fmt.Errorf("order %s: customer %q (null %v), JSON %v; jfr print says null", id, got.Str(), got.IsNull(), asJSON)
			}
		default:
			s := str(want)
			kinds[map[bool]string{true: "empty", false: "text"}[s == ""]]++
			if got.IsNull() || got.Str() != s || asJSON != s {
				return fmt.Errorf("order %s: customer %q (null %v), JSON %v; jfr print says %q", id, got.Str(), got.IsNull(), asJSON, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if kinds["null"] == 0 || kinds["empty"] == 0 || kinds["text"] == 0 {
		t.Fatalf("the recording lacks a kind of customer: %v", kinds)
	}
	t.Logf("customers compared with jfr print: %v", kinds)
}
