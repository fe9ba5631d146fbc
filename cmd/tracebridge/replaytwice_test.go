package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// traceBlocks splits the text output of `traces` into one block per
// trace, sorted.
func traceBlocks(out string) []string {
	blocks := strings.SplitAfter(out, "\n")
	var got []string
	for _, l := range blocks {
		if strings.HasPrefix(l, "trace ") || len(got) == 0 {
			got = append(got, l)
		} else {
			got[len(got)-1] += l
		}
	}
	slices.Sort(got)
	return got
}

// TestReplayTwiceIsOneReplay: the README's tour replays the same log twice
// into the bridge (Kieker TCP, then KDB). Every record arrives twice; the
// copies are duplicates, not conflicts: the store holds the traces of one
// replay (no doubled spans or errors), and `traces` on the bridge's log,
// which holds both copies, prints the traces of the original log, none
// broken, and says how many duplicates it dropped. With a long assembly
// window each trace's copy meets it in the bridge's assembler; with the
// default one (2 s) a copy may come after its trace was stored, and
// stores the same trace again: either way the store holds one replay's.
func TestReplayTwiceIsOneReplay(t *testing.T) {
	for _, window := range []string{"5m", "2s"} {
		t.Run(window, func(t *testing.T) { replayTwice(t, window) })
	}
}

func replayTwice(t *testing.T, window string) {
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	dir := t.TempDir()
	b := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, `
flush_interval: 100ms
traces: {window: `+window+`}
receivers:
  - {name: kieker, type: kieker-tcp, listen: "127.0.0.1:0"}
  - {name: kdb, type: tcp-server, listen: "127.0.0.1:0"}
sinks:
  - {type: kieker-log, path: logs}
  - {type: store, path: store}
`))
	ok(t, "replay", log, "--to", "kieker-tcp://"+b.Addr("kieker"))
	ok(t, "replay", log, "--to", "kdb-tcp://"+b.Addr("kdb"), "--rate", "1000")
	b.Stop() // drains the receivers, assembles what is open, closes the store
	if strings.Contains(b.Stderr(), "level=WARN") || strings.Contains(b.Stderr(), "level=ERROR") {
		t.Errorf("the bridge complained:\n%s", b.Stderr())
	}

	// The log's own traces, as `traces` assembles them.
	want := ok(t, "traces", log)
	if strings.Contains(want.stdout, "broken") || len(traceBlocks(want.stdout)) != 31 {
		t.Fatalf("the shared log's traces are not 31 whole ones:\n%s", want.stdout)
	}

	// The bridge's log holds every record twice.
	got := ok(t, "traces", b.LogDir)
	if g, w := traceBlocks(got.stdout), traceBlocks(want.stdout); !slices.Equal(g, w) {
		t.Errorf("traces of the log replayed twice:\n%s\nwant those of the log:\n%s", got.stdout, want.stdout)
	}
	if !strings.Contains(got.stderr, "tracebridge: 372 duplicate records dropped") {
		t.Errorf("traces does not say that it dropped the 372 events' copies:\n%s", got.stderr)
	}

	// The store: 31 traces with the spans and errors of one replay.
	type summary struct {
		TraceID string `json:"traceId"`
		Spans   int    `json:"spans"`
		Errors  int    `json:"errors"`
	}
	wantSum := map[string]summary{}
	for l := range strings.Lines(ok(t, "traces", "--json", log).stdout) {
		var tr struct {
			TraceID string `json:"traceId"`
			Spans   []struct {
				Error bool `json:"error"`
			} `json:"spans"`
		}
		if err := json.Unmarshal([]byte(l), &tr); err != nil {
			t.Fatalf("traces --json: %v: %s", err, l)
		}
		s := summary{TraceID: tr.TraceID, Spans: len(tr.Spans)}
		for _, sp := range tr.Spans {
			if sp.Error {
				s.Errors++
			}
		}
		wantSum[tr.TraceID] = s
	}
	gotSum := map[string]summary{}
	for l := range strings.Lines(ok(t, "query", "--store", filepath.Join(dir, "store"), "--limit", "1000", "--json").stdout) {
		var s summary
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("query --json: %v: %s", err, l)
		}
		if s.TraceID == "" {
			continue // the last line: the cursor
		}
		if _, dup := gotSum[s.TraceID]; dup {
			t.Errorf("trace %s listed twice", s.TraceID)
		}
		gotSum[s.TraceID] = s
	}
	if len(wantSum) != 31 || len(gotSum) != len(wantSum) {
		t.Errorf("%d traces stored, want %d", len(gotSum), len(wantSum))
	}
	for id, w := range wantSum {
		if g := gotSum[id]; g != w {
			t.Errorf("trace %s stored as %+v, want %+v", id, g, w)
		}
	}
	for id, g := range gotSum {
		if _, ok := wantSum[id]; !ok {
			t.Errorf("trace %s stored (%+v), not a trace of the log", id, g)
		}
	}
}
