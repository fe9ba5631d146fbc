package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestWebKieker: the trace page's sequence diagram tab and the analyses
// page's equivalence classes in Chromium, on a Kieker log replayed into
// the real binary, against what the API answers.
func TestWebKieker(t *testing.T) {
	w := startWebBridge(t)
	ctx := browser(t)
	kt := w.find(t, "realclients")

	t.Run("Sequence", func(t *testing.T) {
		var seq struct {
			Diagrams []struct {
				TraceID      string
				Participants []struct{ Label string }
				Messages     []struct{ Kind, Label string }
			}
		}
		w.apiJSON(t, "/api/v1/traces/"+kt.TraceID+"/sequence?mode=deployment", "", &seq)
		if len(seq.Diagrams) == 0 {
			t.Fatalf("no diagram of trace %s", kt.TraceID)
		}
		d := seq.Diagrams[0]
		openTrace(t, ctx, w.base, "/trace/"+kt.TraceID+"?tab=sequence")
		waitJS(t, ctx, "the sequence diagram drawn", `!!document.querySelector('#sequence-diagram svg')`)
		// Assembly first; switch to deployment.
		eval[bool](t, ctx, `(() => { const s = document.querySelector('#seq-mode'); s.value = 'deployment'; s.dispatchEvent(new Event('change')); return true })()`)
		waitJS(t, ctx, "the deployment diagram drawn", `!!document.querySelector('#sequence-diagram svg') && document.querySelector('#sequence-diagram svg title').textContent.startsWith('deployment')`)
		info := eval[string](t, ctx, `document.querySelector('#seq-info').textContent`)
		if want := fmt.Sprintf("%d lifelines, %d messages", len(d.Participants)-1, len(d.Messages)); info != want {
			t.Errorf("info %q, want %q", info, want)
		}
		text := eval[string](t, ctx, `[...document.querySelectorAll('#sequence-diagram svg text')].map((e) => e.textContent).join('|')`)
		for _, p := range d.Participants[1:] {
			if !strings.Contains(text, p.Label) {
				t.Errorf("the diagram lacks lifeline %q: %s", p.Label, text)
			}
		}
		calls := 0
		for _, m := range d.Messages {
			if m.Kind == "call" {
				calls++
				if !strings.Contains(text, m.Label) {
					t.Errorf("the diagram lacks call %q", m.Label)
				}
			}
		}
		// Every call is a labelled arrow (a line or a loop within a
		// lifeline).
		arrows := eval[int](t, ctx, `document.querySelectorAll('#sequence-diagram svg [marker-end="url(#a)"]').length`)
		if arrows != calls {
			t.Errorf("%d call arrows drawn, %d calls", arrows, calls)
		}
		noBanner(t, ctx)
	})

	t.Run("Equivalence", func(t *testing.T) {
		var eq struct {
			Classes []struct {
				Cardinality    int
				Representative string
			}
		}
		w.apiJSON(t, "/api/v1/analysis/equivalence?mode=deployment", "", &eq)
		if len(eq.Classes) == 0 {
			t.Fatal("no equivalence classes")
		}
		openView(t, ctx, w, "/analysis?tab=equivalence&emode=deployment")
		waitJS(t, ctx, "the classes listed", `!!document.querySelector('#eq-count')`)
		if got, want := eval[string](t, ctx, `document.querySelector('#eq-count').textContent`), fmt.Sprintf("%d classes", len(eq.Classes)); got != want {
			t.Errorf("%q, want %q", got, want)
		}
		cells := eval[string](t, ctx, `[...document.querySelectorAll('.vtable tbody tr')].map((r) => r.innerText.replace(/\s+/g, ' ')).join('\n')`)
		for _, c := range eq.Classes {
			if !strings.Contains(cells, c.Representative) {
				t.Errorf("no row of representative %s in\n%s", c.Representative, cells)
			}
		}
		noBanner(t, ctx)
	})
}
