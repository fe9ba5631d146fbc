package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/analysis/equivalence"
	"github.com/tracebridge/tracebridge/internal/analysis/sequence"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/trace"
)

const kiekerTAUsage = `usage: tracebridge analyze --kieker-trace-analysis -i LOGDIR… -o OUTDIR [Kieker's trace-analysis options]

Takes the command line of Kieker's trace-analysis tool and writes the
files it writes, with its names, into OUTDIR (prefixed by -p):
  --print-Execution-Traces               executionTraces.txt
  --print-Message-Traces                 messageTraces.txt
  --print-Deployment-Equivalence-Classes traceDeploymentEquivClasses.txt
  --print-Assembly-Equivalence-Classes   traceAssemblyEquivClasses.txt
  --print-System-Model                   system-entities.html (never prefixed)
  --plot-Deployment-Sequence-Diagrams    deploymentSequenceDiagram-<traceId>.pic
  --plot-Assembly-Sequence-Diagrams      assemblySequenceDiagram-<traceId>.pic
  --plot-Container-Dependency-Graph      containerDependencyGraph.dot
  --plot-Deployment-Component-Dependency-Graph [responseTimes-ns|-us|-ms|-s]  deploymentComponentDependencyGraph.dot
  --plot-Assembly-Component-Dependency-Graph   [responseTimes-…]            assemblyComponentDependencyGraph.dot
  --plot-Deployment-Operation-Dependency-Graph [responseTimes-…]            deploymentOperationDependencyGraph.dot
  --plot-Assembly-Operation-Dependency-Graph   [responseTimes-…]            assemblyOperationDependencyGraph.dot
  --plot-Aggregated-Deployment-Call-Tree aggregatedDeploymentCallTree.dot
  --plot-Aggregated-Assembly-Call-Tree   aggregatedAssemblyCallTree.dot
  --plot-Call-Trees                      callTree-<traceId>.dot
(Kieker names a graph after -p alone when -p is given; so does this.)
Also: --select-traces ID…, --filter-traces ID…, --ignore-invalid-traces,
--short-labels, --include-self-loops, --ignore-executions-before-date and
--ignore-executions-after-date (yyyyMMdd-HHmmss in UTC, or a timestamp in
ns: a trace with an execution outside is left out), --max-trace-duration
MS (a trace is complete when none of its records came for this long, in
the records' time; default 10 minutes, Kieker's), -v, -d, --buffer-size,
--ignore-assumed-calls (accepted, no effect). Options beyond Kieker's: --format svg|json for sequence
diagrams, --pic-macros FILE (sequence.pic to copy into each .pic).
Not supported: --print-invalid-Execution-Traces, --repair-event-based-traces,
--traceColoring, --addDescriptions, responseTimeColoring.
`

// kiekerTA is a command line of Kieker's trace-analysis tool.
type kiekerTA struct {
	inputs              []string
	outDir, prefix      string
	printExec, printMsg bool
	printSys            bool
	equivAlloc, equivAs bool
	seqAlloc, seqAsm    bool
	graphs              map[analysis.Kind]string // kind → response time unit ("" none, "-" none asked)
	callTrees           bool
	selectIDs           map[string]bool
	invertSelect        bool
	ignoreInvalid       bool
	short, selfLoops    bool
	before, after       int64
	seqFormat, macros   string
	window              time.Duration
}

// kiekerDate parses Kieker's DateConverter input: yyyyMMdd-HHmmss (UTC)
// or a timestamp.
func kiekerDate(s string) (int64, error) {
	if t, err := time.Parse("20060102-150405", s); err == nil {
		return t.UnixNano(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is neither yyyyMMdd-HHmmss nor a timestamp", s)
	}
	return n, nil
}

func parseKiekerTA(args []string) (*kiekerTA, error) {
	k := &kiekerTA{graphs: map[analysis.Kind]string{}, before: -1 << 63, after: 1<<63 - 1, seqFormat: "pic", window: 10 * time.Minute}
	values := func(i int) []string { // the values after args[i], up to the next option
		var out []string
		for _, a := range args[i+1:] {
			if strings.HasPrefix(a, "-") && len(a) > 1 && (a[1] < '0' || a[1] > '9') {
				break
			}
			out = append(out, a)
		}
		return out
	}
	graphKinds := map[string]analysis.Kind{
		"--plot-Deployment-Component-Dependency-Graph": analysis.DeploymentComponentGraph,
		"--plot-Assembly-Component-Dependency-Graph":   analysis.AssemblyComponentGraph,
		"--plot-Deployment-Operation-Dependency-Graph": analysis.DeploymentOperationGraph,
		"--plot-Assembly-Operation-Dependency-Graph":   analysis.AssemblyOperationGraph,
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		one := func() (string, error) {
			v := values(i)
			if len(v) != 1 {
				return "", usagef("analyze --kieker-trace-analysis: %s takes one value", a)
			}
			i++
			return v[0], nil
		}
		var err error
		switch a {
		case "-i", "--inputdirs":
			v := values(i)
			k.inputs = append(k.inputs, v...)
			i += len(v)
		case "-o", "--outputdir":
			k.outDir, err = one()
		case "-p", "--output-filename-prefix":
			k.prefix, err = one()
		case "--print-Execution-Traces":
			k.printExec = true
		case "--print-Message-Traces":
			k.printMsg = true
		case "--print-System-Model":
			k.printSys = true
		case "--print-Deployment-Equivalence-Classes":
			k.equivAlloc = true
		case "--print-Assembly-Equivalence-Classes":
			k.equivAs = true
		case "--plot-Deployment-Sequence-Diagrams":
			k.seqAlloc = true
		case "--plot-Assembly-Sequence-Diagrams":
			k.seqAsm = true
		case "--plot-Container-Dependency-Graph":
			k.graphs[analysis.ContainerGraph] = ""
		case "--plot-Aggregated-Deployment-Call-Tree":
			k.graphs[analysis.AggregatedDeploymentCallTree] = ""
		case "--plot-Aggregated-Assembly-Call-Tree":
			k.graphs[analysis.AggregatedAssemblyCallTree] = ""
		case "--plot-Call-Trees":
			k.callTrees = true
		case "--select-traces", "--filter-traces":
			v := values(i)
			i += len(v)
			k.invertSelect = a == "--filter-traces"
			if k.selectIDs == nil {
				k.selectIDs = map[string]bool{}
			}
			for _, id := range v {
				for id := range strings.SplitSeq(id, ",") {
					if id != "" {
						k.selectIDs[id] = true
					}
				}
			}
		case "--ignore-invalid-traces":
			k.ignoreInvalid = true
		case "--short-labels":
			k.short = true
		case "--include-self-loops":
			k.selfLoops = true
		case "--ignore-executions-before-date", "--ignore-executions-after-date":
			var v string
			if v, err = one(); err == nil {
				var t int64
				if t, err = kiekerDate(v); err != nil {
					return nil, usagef("analyze --kieker-trace-analysis: %s: %v", a, err)
				}
				if a == "--ignore-executions-before-date" {
					k.before = t
				} else {
					k.after = t
				}
			}
		case "--max-trace-duration":
			var v string
			if v, err = one(); err == nil {
				ms, perr := strconv.ParseInt(v, 10, 64)
				if perr != nil || ms <= 0 {
					return nil, usagef("analyze --kieker-trace-analysis: --max-trace-duration takes milliseconds")
				}
				k.window = time.Duration(ms) * time.Millisecond
			}
		case "--buffer-size":
			_, err = one()
		case "-v", "--verbose", "-d", "--debug", "--ignore-assumed-calls":
		case "--format":
			k.seqFormat, err = one()
			if err == nil && k.seqFormat != "pic" && k.seqFormat != "svg" && k.seqFormat != "json" {
				return nil, usagef("analyze --kieker-trace-analysis: --format must be pic, svg or json")
			}
		case "--pic-macros":
			var p string
			if p, err = one(); err == nil {
				b, rerr := os.ReadFile(p)
				if rerr != nil {
					return nil, usagef("analyze --kieker-trace-analysis: --pic-macros: %v", rerr)
				}
				k.macros = strings.TrimSuffix(string(b), "\n")
			}
		case "-h", "--help":
			return nil, usagef("%s", kiekerTAUsage)
		default:
			kind, ok := graphKinds[a]
			if !ok {
				return nil, usagef("analyze --kieker-trace-analysis: unknown or unsupported option %q\n%s", a, kiekerTAUsage)
			}
			unit := ""
			v := values(i)
			i += len(v)
			for _, d := range v {
				u, ok := strings.CutPrefix(d, "responseTimes-")
				if !ok || !slices.Contains([]string{"ns", "us", "ms", "s"}, u) {
					return nil, usagef("analyze --kieker-trace-analysis: %s: unsupported decorator %q (responseTimes-ns, -us, -ms or -s)", a, d)
				}
				unit = u
			}
			k.graphs[kind] = unit
		}
		if err != nil {
			return nil, err
		}
	}
	if k.outDir == "" {
		return nil, usagef("analyze --kieker-trace-analysis: -o OUTDIR is required (as for Kieker's tool)\n%s", kiekerTAUsage)
	}
	if len(k.inputs) == 0 {
		return nil, usagef("analyze --kieker-trace-analysis: no input directory (-i LOGDIR…)")
	}
	return k, nil
}

// selected reports whether Kieker's trace id and time filters keep m.
func (k *kiekerTA) selected(m *analysis.MessageTrace) bool {
	if k.selectIDs != nil && k.selectIDs[m.ID] == k.invertSelect {
		return false
	}
	for i := range m.Execs {
		if m.Execs[i].Start < k.before || m.Execs[i].End > k.after {
			return false
		}
	}
	return true
}

// graphFile is the name Kieker's GraphWriterPlugin gives a graph: the
// prefix when there is one, else the graph's own name.
func (k *kiekerTA) graphFile(kind analysis.Kind) string {
	if k.prefix != "" {
		return k.prefix
	}
	return map[analysis.Kind]string{
		analysis.ContainerGraph:               "containerDependencyGraph.dot",
		analysis.DeploymentComponentGraph:     "deploymentComponentDependencyGraph.dot",
		analysis.AssemblyComponentGraph:       "assemblyComponentDependencyGraph.dot",
		analysis.DeploymentOperationGraph:     "deploymentOperationDependencyGraph.dot",
		analysis.AssemblyOperationGraph:       "assemblyOperationDependencyGraph.dot",
		analysis.AggregatedDeploymentCallTree: k.prefix + "aggregatedDeploymentCallTree.dot",
		analysis.AggregatedAssemblyCallTree:   k.prefix + "aggregatedAssemblyCallTree.dot",
	}[kind]
}

func cmdKiekerTraceAnalysis(ctx context.Context, args []string, stderr io.Writer) error {
	k, err := parseKiekerTA(args)
	if err != nil {
		return err
	}
	cat, err := loadCatalog(nil)
	if err != nil {
		return err
	}
	an := analysis.New(analysis.Options{})
	model := sysmodel.New()
	var calls []*analysis.MessageTrace
	var invalid []analysis.Invalid
	emit := func(t *trace.Trace) {
		ms, inv := analysis.Messages(t, analysis.Options{})
		invalid = append(invalid, inv...)
		for _, m := range ms {
			if !k.selected(m) {
				continue
			}
			an.AddMessages(m)
			model.Add(m)
			if k.callTrees {
				calls = append(calls, m)
			}
		}
	}
	asm := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Window: k.window, Emit: emit})
	feed := pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		asm.AddBatch(b)
		asm.Tick()
		return nil
	})
	skips := &skipReporter{w: stderr}
	var sum kiekerlog.Stats
	for _, p := range k.inputs {
		r, err := kiekerlog.Open(p, kiekerlog.Options{Catalog: cat, OnSkip: skips.report})
		if err != nil {
			return err
		}
		err = r.Run(ctx, feed)
		sum.Add(r.Stats())
		if err != nil {
			return err
		}
	}
	asm.Flush()
	reportSkipped(stderr, sum)
	if err := os.MkdirAll(k.outDir, 0o755); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	traces := model.Finish()
	write := func(name string, f func(w io.Writer) error) error {
		path := filepath.Join(k.outDir, name)
		fh, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
		bw := bufio.NewWriterSize(fh, 1<<20)
		err = f(bw)
		if err == nil {
			err = bw.Flush()
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("analyze: %s: %w", path, err)
		}
		return nil
	}
	if k.printExec {
		if err := write(k.prefix+"executionTraces.txt", func(w io.Writer) error { return kiekerOut{exec: true}.writeTraces(w, traces) }); err != nil {
			return err
		}
	}
	if k.printMsg {
		if err := write(k.prefix+"messageTraces.txt", func(w io.Writer) error { return kiekerOut{msg: true}.writeTraces(w, traces) }); err != nil {
			return err
		}
	}
	for _, e := range []struct {
		on   bool
		mode equivalence.Mode
		name string
	}{{k.equivAlloc, equivalence.Allocation, "traceDeploymentEquivClasses.txt"}, {k.equivAs, equivalence.Assembly, "traceAssemblyEquivClasses.txt"}} {
		if !e.on {
			continue
		}
		c := equivalence.New(e.mode)
		for _, t := range traces {
			c.Add(t)
		}
		if err := write(k.prefix+e.name, func(w io.Writer) error { return equivalence.Write(w, c.Classes()) }); err != nil {
			return err
		}
	}
	if k.printSys {
		if err := write("system-entities.html", model.Repo.WriteHTML); err != nil {
			return err
		}
	}
	for _, s := range []struct {
		on   bool
		mode sequence.Mode
	}{{k.seqAlloc, sequence.Deployment}, {k.seqAsm, sequence.Assembly}} {
		if !s.on {
			continue
		}
		ko := kiekerOut{seq: s.mode, short: k.short, macros: k.macros}
		if _, err := ko.sequences(nil, traces, k.seqFormat, k.outDir); err != nil {
			return err
		}
	}
	for kind := analysis.ContainerGraph; kind <= analysis.AggregatedAssemblyCallTree; kind++ {
		unit, ok := k.graphs[kind]
		if !ok {
			continue
		}
		g, err := an.Graph(kind)
		if err != nil {
			return err
		}
		if !k.selfLoops {
			g = g.WithoutSelfLoops()
		}
		if unit == "" {
			g = g.WithoutStats()
		}
		if err := write(k.graphFile(kind), func(w io.Writer) error {
			return analysis.WriteGraph(ctx, w, g, "dot", analysis.DOTOptions{ShortLabels: k.short, Unit: cmpOr(unit, "ns"), AssemblyNames: model.Repo.AssemblyNames()})
		}); err != nil {
			return err
		}
	}
	names := model.Repo.AssemblyNames()
	for _, m := range calls {
		g := analysis.TraceCallTree(m)
		if err := write(k.prefix+"callTree-"+m.ID+".dot", func(w io.Writer) error {
			return analysis.WriteGraph(ctx, w, g, "dot", analysis.DOTOptions{ShortLabels: k.short, AssemblyNames: names})
		}); err != nil {
			return err
		}
	}
	s := an.Summary()
	fmt.Fprintf(stderr, "tracebridge: analysed %d traces (%d calls)\n", s.Messages, s.Calls)
	if len(invalid) > 0 {
		if k.ignoreInvalid {
			fmt.Fprintf(stderr, "tracebridge: left out %d invalid traces (--ignore-invalid-traces)\n", len(invalid))
		} else {
			fmt.Fprintf(stderr, "tracebridge: %d invalid traces, left out (Kieker's tool stops at the first one unless --ignore-invalid-traces):\n", len(invalid))
			for i, v := range invalid {
				if i == 5 {
					fmt.Fprintf(stderr, "tracebridge: (%d more)\n", len(invalid)-5)
					break
				}
				fmt.Fprintf(stderr, "tracebridge: invalid: %s\n", v)
			}
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
