package flame

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	jfr "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/record"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func TestFolded(t *testing.T) {
	var s Stacks
	s.Add([]string{"main", "a", "b"}, 3)
	s.Add([]string{"main", "a"}, 1)
	s.AddLeafFirst([]string{"b line: 7", "a line: 3", "main"}, TrimLine, 2)
	s.Add([]string{"main", "weird;name\nx", ""}, 1)
	s.Add([]string{"main"}, 0) // no samples: nothing
	var buf bytes.Buffer
	if err := s.WriteFolded(&buf); err != nil {
		t.Fatal(err)
	}
	want := "main;a 1\nmain;a;b 5\nmain;weird:name x;[unknown] 1\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
	back, err := ReadFolded(strings.NewReader("# comment\n\n" + want))
	if err != nil {
		t.Fatal(err)
	}
	if back.Total() != 7 || back.Len() != 3 || back.Count("main;a;b") != 5 {
		t.Fatalf("read back: total %d, %d stacks", back.Total(), back.Len())
	}
	for _, bad := range []string{"nocount\n", "a;b x\n", "a;b -1\n"} {
		if _, err := ReadFolded(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMaxStacks(t *testing.T) {
	s := Stacks{MaxStacks: 2}
	for i := 0; i < 5; i++ {
		s.Add([]string{"f" + strconv.Itoa(i)}, 1)
	}
	if s.Len() != 3 || s.Count(Other) != 3 || s.Total() != 5 {
		t.Fatalf("%d stacks, %d other, total %d", s.Len(), s.Count(Other), s.Total())
	}
}

func TestAddKnownStackDoesNotAllocate(t *testing.T) {
	var s Stacks
	frames := []string{"java.lang.Thread.run() line: 840", "Workload.orders() line: 241"}
	s.AddLeafFirst(frames, TrimLine, 1)
	if n := testing.AllocsPerRun(100, func() { s.AddLeafFirst(frames, TrimLine, 1) }); n != 0 {
		t.Fatalf("%v allocations per known stack", n)
	}
}

// svgFrames parses the SVG and returns its frames' titles and rectangles.
type svgFrame struct {
	title   string
	x, w, y float64
}

func parseSVG(t *testing.T, b []byte) []svgFrame {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var out []svgFrame
	var cur *svgFrame
	inTitle := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "g":
				out = append(out, svgFrame{})
				cur = &out[len(out)-1]
			case "title":
				inTitle = cur != nil
			case "rect":
				if cur != nil {
					for _, a := range e.Attr {
						v, _ := strconv.ParseFloat(a.Value, 64)
						switch a.Name.Local {
						case "x":
							cur.x = v
						case "width":
							cur.w = v
						case "y":
							cur.y = v
						}
					}
				}
			}
		case xml.CharData:
			if inTitle {
				cur.title += string(e)
			}
		case xml.EndElement:
			if e.Name.Local == "title" {
				inTitle = false
			}
			if e.Name.Local == "g" {
				cur = nil
			}
		}
	}
	return out
}

func TestSVG(t *testing.T) {
	var s Stacks
	s.Add([]string{"java.lang.Thread.run()", "Workload.orders()", "Workload$Order.<init>()"}, 6)
	s.Add([]string{"java.lang.Thread.run()", "Workload.contend()", "Workload.busy(long)"}, 3)
	s.Add([]string{"java.lang.Thread.run()", "Workload.contend()"}, 1)
	s.Add([]string{"GC Thread & <friends>"}, 2)
	var buf bytes.Buffer
	if err := s.WriteSVG(&buf, SVGOptions{Title: "CPU", Subtitle: "thread main"}); err != nil {
		t.Fatal(err)
	}
	golden(t, "small.svg", buf.Bytes())
	frames := parseSVG(t, buf.Bytes())
	if len(frames) != 7 {
		t.Fatalf("%d frames, want 7 (all, 6 distinct frames)", len(frames))
	}
	all := frames[0]
	if all.title != "all (12 samples, 100.00%)" || all.w != 1180 {
		t.Fatalf("root frame %+v", all)
	}
	found := false
	for _, f := range frames {
		if f.w > all.w || f.x < all.x || f.x+f.w > all.x+all.w+0.01 {
			t.Errorf("frame %+v outside the root", f)
		}
		if f.title == "Workload$Order.<init>() (6 samples, 50.00%)" {
			found = true
			if f.w != 590 {
				t.Errorf("half the samples, width %v", f.w)
			}
		}
	}
	if !found {
		t.Error("escaped frame name not found")
	}
	var empty bytes.Buffer
	if err := (&Stacks{}).WriteSVG(&empty, SVGOptions{}); err != nil {
		t.Fatal(err)
	}
	parseSVG(t, empty.Bytes())
}

// decodeSmall decodes the codec's committed recording.
func decodeSmall(t *testing.T) []record.Record {
	data, err := os.ReadFile("../codec/jfr/testdata/small.jfr")
	if err != nil {
		t.Fatal(err)
	}
	s := jfr.NewStream(jfr.Options{})
	h, err := jfr.ReadHeader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Open(bytes.NewReader(data), 0, h)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Record
	var b record.Batch
	for {
		b.Reset()
		_, err := c.Next(&b, 100)
		for i := range b.Records {
			out = append(out, b.Records[i].Clone())
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestAggregateExecutionSamples(t *testing.T) {
	recs := decodeSmall(t)
	samples := 0
	threads := map[string]bool{}
	for i := range recs {
		if recs[i].Type.Name == "jdk.ExecutionSample" {
			samples++
			v, _ := recs[i].Field("sampledThread")
			threads[v.Str()] = true
		}
	}
	var all Aggregator
	perThread := Aggregator{Group: ByField("sampledThread"), Window: time.Second}
	var b record.Batch
	for i := range recs {
		b.AddRecord(&recs[i])
	}
	all.Consume(context.Background(), &b)
	perThread.Consume(context.Background(), &b)
	if got := all.Merged().Total(); got != int64(samples) || samples == 0 {
		t.Fatalf("%d samples aggregated, the recording has %d", got, samples)
	}
	groups := map[string]bool{}
	var total int64
	for _, p := range perThread.Profiles() {
		groups[p.Group] = true
		total += p.Stacks.Total()
		if p.End-p.Start != int64(time.Second) || p.Start%int64(time.Second) != 0 {
			t.Errorf("window %d–%d", p.Start, p.End)
		}
	}
	if total != int64(samples) || len(groups) != len(threads) {
		t.Fatalf("per thread: %d samples in %d groups, want %d in %d", total, len(groups), samples, len(threads))
	}
	var folded bytes.Buffer
	all.Merged().WriteFolded(&folded)
	golden(t, "small.folded", folded.Bytes())
	if !strings.Contains(folded.String(), "java.lang.Thread.run();") || strings.Contains(folded.String(), " line: ") {
		t.Errorf("folded stacks:\n%s", folded.String())
	}
}
