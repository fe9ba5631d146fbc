package sequence

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/analysis/analysistest"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
)

func traces(t *testing.T, dir string) []*sysmodel.ExecutionTrace {
	t.Helper()
	m := sysmodel.New()
	analysistest.Messages(t, dir, m.Add)
	return m.Finish()
}

func find(t *testing.T, ts []*sysmodel.ExecutionTrace, id string) *sysmodel.ExecutionTrace {
	t.Helper()
	for _, tr := range ts {
		if tr.ID == id {
			return tr
		}
	}
	t.Fatalf("no trace %s", id)
	return nil
}

// TestPic: trace 5 of ../sysmodel/testdata/oer runs on host B, whose
// allocation components Kieker numbers 5 (a.A), 2 (b.B) and 4 (c.C) while
// their assembly components are @3, @1 and @2. Worked out by hand from
// Kieker's SequenceDiagramFilter.
func TestPic(t *testing.T) {
	tr := find(t, traces(t, "../sysmodel/testdata/oer"), "5")
	body := `step();
active(O0);
async();
message(O0,OA, "main(..)");
active(OA);
step();
sync();
message(OA,OB, "work()");
active(OB);
step();
step();
async();
rmessage(OB,OA, "");
inactive(OB);
sync();
message(OA,OC, "run(..)");
active(OC);
step();
step();
async();
rmessage(OC,OA, "");
inactive(OC);
step();
async();
rmessage(OA,O0, "");
inactive(OA);
inactive(O0);
step();
complete(O0);
`
	for _, tc := range []struct {
		mode  Mode
		short bool
		want  string
	}{
		{Deployment, false, `.PS
copy "sequence.pic";
boxwid = 1.1;
movewid = 0.5;
actor(O0,"");
object(O5,"B::","@3:a.A");
object(O2,"B::","@1:b.B");
object(O4,"B::","@2:c.C");
` + strings.NewReplacer("OA", "O5", "OB", "O2", "OC", "O4").Replace(body) + `complete(O2);
complete(O4);
complete(O5);
complete(O0);
.PE
`},
		{Assembly, true, `.PS
copy "sequence.pic";
boxwid = 1.1;
movewid = 0.5;
actor(O0,"");
object(O3,"","@3:..A");
object(O1,"","@1:..B");
object(O2,"","@2:..C");
` + strings.NewReplacer("OA", "O3", "OB", "O1", "OC", "O2").Replace(body) + `complete(O1);
complete(O2);
complete(O3);
complete(O0);
.PE
`},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			var b bytes.Buffer
			if err := New(tr, tc.mode, tc.short).WritePic(&b, ""); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, b.String()); d != "" {
				t.Errorf("pic (-want +got):\n%s", d)
			}
		})
	}
}

// chain is a trace of n nested calls.
func chain(n int) *sysmodel.ExecutionTrace {
	ty := &sysmodel.ComponentType{ID: 1, Package: "p", Name: "C<T>"}
	al := &sysmodel.Allocation{ID: 1, Assembly: &sysmodel.Assembly{ID: 1, Type: ty}, Container: &sysmodel.Container{ID: 1, Name: "h&1"}}
	op := &sysmodel.Operation{ID: 1, Type: ty, Sig: analysis.Signature{Name: "f"}}
	t := &sysmodel.ExecutionTrace{ID: "1"}
	for i := range n {
		t.Execs = append(t.Execs, sysmodel.Execution{Alloc: al, Op: op, EOI: i, ESS: i, Tin: int64(i), Tout: int64(2*n - i)})
	}
	return t
}

// TestSVG: the SVG is well-formed XML (names escaped), draws every
// message of a small trace and cuts a large one at MaxMessages with a
// note.
func TestSVG(t *testing.T) {
	for _, tc := range []struct {
		n       int
		cut     bool
		replies int
	}{{3, false, 2}, {MaxMessages, true, 0}} {
		var b bytes.Buffer
		d := New(chain(tc.n), Deployment, false)
		if err := d.WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(&b)
		var texts []string
		lines := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%d calls: not XML: %v", tc.n, err)
			}
			switch e := tok.(type) {
			case xml.CharData:
				texts = append(texts, string(e))
			case xml.StartElement:
				if e.Name.Local == "line" {
					for _, a := range e.Attr {
						if a.Name.Local == "stroke-dasharray" && a.Value == "5 3" {
							lines++
						}
					}
				}
			}
		}
		all := strings.Join(texts, "|")
		if !strings.Contains(all, "@1:p.C<T>") || !strings.Contains(all, "h&1::") {
			t.Errorf("%d calls: labels missing: %q", tc.n, all[:min(len(all), 200)])
		}
		// Every call of the chain is within one participant but the
		// first; replies between two participants: only the last one.
		if tc.n == 3 && lines != 1 {
			t.Errorf("3 calls: %d reply arrows between participants, want 1", lines)
		}
		note := strings.Contains(all, "more messages not drawn")
		if note != tc.cut {
			t.Errorf("%d calls (%d messages): cut note %v, want %v", tc.n, 2*tc.n, note, tc.cut)
		}
		if tc.cut && !strings.Contains(all, "… 2000 more messages") {
			t.Errorf("cut note does not count the %d messages left out: %q", MaxMessages, all[len(all)-200:])
		}
	}
}

// TestJSON: participants in order of appearance, messages in order with
// their kinds.
func TestJSON(t *testing.T) {
	d := New(find(t, traces(t, "../sysmodel/testdata/events"), "1"), Assembly, false)
	var kinds []string
	for _, m := range d.Messages {
		kinds = append(kinds, m.Kind+":"+m.Label)
	}
	if diff := cmp.Diff([]string{"call:outer()", "call:inner(..)", "reply:", "reply:"}, kinds); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if d.Participants[1].Label != "@3:x.X" || d.Participants[2].Label != "@2:y.Y" {
		t.Errorf("participants %+v", d.Participants)
	}
}
