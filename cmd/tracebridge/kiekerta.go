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
	"github.com/tracebridge/tracebridge/internal/analysis/reconstruct"
	"github.com/tracebridge/tracebridge/internal/analysis/sequence"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
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
  --print-invalid-Execution-Traces       invalidTraceArtifacts.txt
Also: --select-traces ID…, --filter-traces ID…, --ignore-invalid-traces,
--short-labels, --include-self-loops, --ignore-assumed-calls (assumed
executions are not marked " (assumed)"), --repair-event-based-traces
(calls whose After events are missing are closed, as Kieker's
TraceBuffer does), --ignore-executions-before-date and
--ignore-executions-after-date (yyyyMMdd-HHmmss in UTC, or a timestamp in
the log's time unit: records outside are dropped one by one, as Kieker's
TimestampFilter does, so an event trace that loses events is invalid),
--max-trace-duration MS (an OperationExecutionRecord trace is complete
when a tout this much after its earliest tin is read; default 10
minutes, Kieker's), -v, -d, --buffer-size, --traceColoring FILE and
--addDescriptions FILE (accepted; Kieker's tool uses them in no output).
Traces are written as Kieker's tool hands them on (an event trace when
its last call returns), so memory holds the open traces and the system
model, not the log. Options beyond Kieker's: --format svg|json for
sequence diagrams, --pic-macros FILE (sequence.pic to copy into each
.pic).
Not supported: the responseTimeColoring decorator.
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
	selectIDs           map[int64]bool
	invertSelect        bool
	ignoreInvalid       bool
	printInvalid        bool
	repair              bool
	ignoreAssumed       bool
	short, selfLoops    bool
	dates               bool
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
	k := &kiekerTA{graphs: map[analysis.Kind]string{}, before: 0, after: 1<<63 - 1, seqFormat: "pic", window: 10 * time.Minute}
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
				k.selectIDs = map[int64]bool{}
			}
			for _, id := range v {
				for id := range strings.SplitSeq(id, ",") {
					if id == "" {
						continue
					}
					n, perr := strconv.ParseInt(id, 10, 64)
					if perr != nil {
						return nil, usagef("analyze --kieker-trace-analysis: %s: %q is not a trace id", a, id)
					}
					k.selectIDs[n] = true
				}
			}
		case "--ignore-invalid-traces":
			k.ignoreInvalid = true
		case "--print-invalid-Execution-Traces":
			k.printInvalid = true
		case "--repair-event-based-traces":
			k.repair = true
		case "--ignore-assumed-calls":
			k.ignoreAssumed = true
		case "--traceColoring", "--addDescriptions":
			// Kieker's trace-analysis (2.x) reads these files' names and
			// uses them in no output; so does this.
			_, err = one()
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
				k.dates = true
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
		case "-v", "--verbose", "-d", "--debug":
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

// taFiles are the drop-in's files written as traces come.
type taFiles struct {
	dir string
	fs  []*os.File
	ws  []*bufio.Writer
	err error
}

// open creates name in the output directory (nil, with f.err set, if it
// cannot).
func (f *taFiles) open(name string) *bufio.Writer {
	if f.err != nil {
		return nil
	}
	fh, err := os.Create(filepath.Join(f.dir, name))
	if err != nil {
		f.err = fmt.Errorf("analyze: %w", err)
		return nil
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	f.fs, f.ws = append(f.fs, fh), append(f.ws, w)
	return w
}

func (f *taFiles) write(w *bufio.Writer, b []byte) {
	if w == nil || f.err != nil {
		return
	}
	if _, err := w.Write(b); err != nil {
		f.err = fmt.Errorf("analyze: %w", err)
	}
}

func (f *taFiles) close() error {
	for i, fh := range f.fs {
		err := f.ws[i].Flush()
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil && f.err == nil {
			f.err = fmt.Errorf("analyze: %s: %w", fh.Name(), err)
		}
	}
	f.fs, f.ws = nil, nil
	return f.err
}

// writeFile writes one whole file of the output directory.
func (f *taFiles) writeFile(name string, fill func(w io.Writer) error) error {
	if f.err != nil {
		return f.err
	}
	path := filepath.Join(f.dir, name)
	fh, err := os.Create(path)
	if err != nil {
		f.err = fmt.Errorf("analyze: %w", err)
		return f.err
	}
	w := bufio.NewWriterSize(fh, 64<<10)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		f.err = fmt.Errorf("analyze: %s: %w", path, err)
	}
	return f.err
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
	if err := os.MkdirAll(k.outDir, 0o755); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	files := &taFiles{dir: k.outDir}
	defer files.close()
	var execW, msgW, invW *bufio.Writer
	if k.printExec {
		execW = files.open(k.prefix + "executionTraces.txt")
	}
	if k.printMsg {
		msgW = files.open(k.prefix + "messageTraces.txt")
	}
	if k.printInvalid {
		invW = files.open(k.prefix + "invalidTraceArtifacts.txt")
	}
	if files.err != nil {
		return files.err
	}
	type equiv struct {
		c    *equivalence.Classifier
		name string
	}
	var equivs []equiv
	if k.equivAlloc {
		equivs = append(equivs, equiv{equivalence.New(equivalence.Allocation), "traceDeploymentEquivClasses.txt"})
	}
	if k.equivAs {
		equivs = append(equivs, equiv{equivalence.New(equivalence.Assembly), "traceAssemblyEquivClasses.txt"})
	}
	var seqs []kiekerOut
	seqDir := filepath.Join(k.outDir, k.prefix) // Kieker: prefix + File.separator + name
	if k.seqAlloc {
		seqs = append(seqs, kiekerOut{seq: sequence.Deployment, short: k.short, macros: k.macros})
	}
	if k.seqAsm {
		seqs = append(seqs, kiekerOut{seq: sequence.Assembly, short: k.short, macros: k.macros})
	}
	if len(seqs) > 0 {
		if err := os.MkdirAll(seqDir, 0o755); err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
	}

	var kinds []analysis.Kind // the graphs asked for: the analyzer builds only those
	for kind := range k.graphs {
		kinds = append(kinds, kind)
	}
	an := analysis.New(analysis.Options{Graphs: kinds})
	repo := sysmodel.NewRepository()
	var (
		buf      []byte
		mt       analysis.MessageTrace
		invalid  []string
		nInvalid int
	)
	valid := func(t *sysmodel.ExecutionTrace) {
		if files.err != nil {
			return
		}
		if execW != nil {
			buf = sysmodel.AppendExecutionTrace(buf[:0], t)
			files.write(execW, buf)
		}
		if msgW != nil {
			buf = sysmodel.AppendMessageTrace(buf[:0], t)
			files.write(msgW, buf)
		}
		for _, e := range equivs {
			e.c.Add(t)
		}
		for _, ko := range seqs {
			if err := ko.drawFile(seqDir, t, k.seqFormat); err != nil && files.err == nil {
				files.err = err
			}
		}
		if len(kinds) == 0 && !k.callTrees {
			return
		}
		t.MessageTrace(&mt)
		if len(kinds) > 0 {
			an.AddMessages(&mt)
		}
		if k.callTrees {
			g := analysis.TraceCallTree(&mt)
			if err := files.writeFile(k.prefix+"callTree-"+t.ID+".dot", func(w io.Writer) error {
				return analysis.WriteGraph(ctx, w, g, "dot", analysis.DOTOptions{ShortLabels: k.short, AssemblyNames: repo.AssemblyNames()})
			}); err != nil {
				return
			}
		}
	}
	inv := func(v *reconstruct.Invalid) {
		nInvalid++
		if len(invalid) < 5 {
			invalid = append(invalid, v.String())
		}
		if invW != nil && v.Trace != nil {
			buf = sysmodel.AppendExecutionTrace(buf[:0], v.Trace)
			files.write(invW, buf)
		}
	}
	rc := reconstruct.New(repo, reconstruct.Options{Repair: k.repair, IgnoreAssumed: k.ignoreAssumed, MaxTraceDuration: k.window,
		Dates: k.dates, Before: k.before, After: k.after, Select: k.selectIDs, Invert: k.invertSelect, Valid: valid, Invalid: inv})
	feed := pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		rc.Add(b)
		return files.err
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
	rc.Finish()
	reportSkipped(stderr, sum)
	if err := files.close(); err != nil {
		return err
	}
	for _, e := range equivs {
		if err := files.writeFile(k.prefix+e.name, func(w io.Writer) error { return equivalence.Write(w, e.c.Classes()) }); err != nil {
			return err
		}
	}
	if k.printSys {
		if err := files.writeFile("system-entities.html", repo.WriteHTML); err != nil {
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
		if err := files.writeFile(k.graphFile(kind), func(w io.Writer) error {
			return analysis.WriteGraph(ctx, w, g, "dot", analysis.DOTOptions{ShortLabels: k.short, Unit: cmpOr(unit, "ns"), AssemblyNames: repo.AssemblyNames()})
		}); err != nil {
			return err
		}
	}
	s := rc.Stats()
	fmt.Fprintf(stderr, "tracebridge: analysed %d traces (%d calls)\n", s.Valid, s.Executions)
	if nInvalid > 0 {
		if k.ignoreInvalid {
			fmt.Fprintf(stderr, "tracebridge: left out %d invalid traces (--ignore-invalid-traces)\n", nInvalid)
		} else {
			fmt.Fprintf(stderr, "tracebridge: %d invalid traces, left out (Kieker's tool stops at the first invalid OperationExecutionRecord trace unless --ignore-invalid-traces):\n", nInvalid)
			for _, v := range invalid {
				fmt.Fprintf(stderr, "tracebridge: invalid: %s\n", v)
			}
			if nInvalid > len(invalid) {
				fmt.Fprintf(stderr, "tracebridge: (%d more)\n", nInvalid-len(invalid))
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
