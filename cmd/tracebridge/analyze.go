package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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

const analyzeSynopsis = `analyze --graph G [--response-times] [--format dot|json|svg] [-o FILE] LOGDIR…
       tracebridge analyze --stats [--format table|json] [-o FILE] LOGDIR…
       tracebridge analyze --execution-traces|--message-traces [--format text|json] [-o FILE] LOGDIR…
       tracebridge analyze --equivalence-classes assembly|deployment [--format text|json] [-o FILE] LOGDIR…
       tracebridge analyze --system-model [--format html|json] [-o FILE] LOGDIR…
       tracebridge analyze --sequence-diagram assembly|deployment[:TRACEID] [--format pic|svg|json] [--short-labels] -o DIR|FILE LOGDIR…
       tracebridge analyze --kieker-trace-analysis -i LOGDIR… -o OUTDIR [Kieker's trace-analysis options] (--kieker-trace-analysis -h lists them)
       tracebridge analyze … --store DIR [--since T] [--until T] [--host H]   (the traces of a trace store instead of logs)
       tracebridge analyze --flame [--per-thread|--per-host] [--every D] [-o PREFIX] RECORDING.jfr|REPOSITORY|LOGDIR…

G is one of container, deployment-component, assembly-component,
deployment-operation, assembly-operation (dependency graphs),
aggregated-deployment-call-tree, aggregated-assembly-call-tree, or
call-tree:TRACEID (the call tree of one Kieker trace or OTLP trace).
Traces Kieker's trace analysis finds invalid are left out (and counted on
stderr) unless --include-invalid. --execution-traces, --message-traces
and --equivalence-classes write Kieker's trace-analysis outputs
(--print-Execution-Traces, --print-Message-Traces,
--print-Assembly/Deployment-Equivalence-Classes), line for line. --flame draws flame graphs of JFR
execution samples ('analyze --flame -h' for its flags).
`

func cmdAnalyze(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--kieker-trace-analysis" {
			return cmdKiekerTraceAnalysis(ctx, slices.DeleteFunc(slices.Clone(args), func(s string) bool { return s == a }), stderr)
		}
		if a == "--flame" || a == "-flame" || a == "--flame=true" || a == "-flame=true" {
			return cmdFlame(ctx, args, stdout, stderr)
		}
	}
	fs := newFlags("analyze", analyzeSynopsis, stderr)
	graphName := fs.String("graph", "", "the graph to draw (see above)")
	stats := fs.Bool("stats", false, "print statistics per operation instead of a graph")
	execTraces := fs.Bool("execution-traces", false, "print the execution traces as Kieker's --print-Execution-Traces does")
	msgTraces := fs.Bool("message-traces", false, "print the message traces as Kieker's --print-Message-Traces does")
	sysModel := fs.Bool("system-model", false, "print the system model (containers, component types, operations, assembly and deployment components with Kieker's numbers) as Kieker's system-entities.html, or JSON")
	seqDiag := fs.String("sequence-diagram", "", "draw UML sequence diagrams, `assembly|deployment[:TRACEID]`: one per trace into the directory -o names (Kieker's file names), or the one trace named (to -o FILE or standard output)")
	picMacros := fs.String("pic-macros", "", "with --format pic: put this `sequence.pic` (UMLGraph's macros) into each diagram as Kieker does; without it a diagram copies \"sequence.pic\"")
	equiv := fs.String("equivalence-classes", "", "print the trace equivalence classes, `assembly` or deployment, as Kieker's --print-Assembly/Deployment-Equivalence-Classes do")
	format := fs.String("format", "", "output: dot (default), json or svg for graphs; table (default) or json for --stats")
	respTimes := fs.Bool("response-times", false, "label nodes with the response times of the calls into them (min/avg/max/total)")
	unit := fs.String("time-unit", "ns", "unit of the response times in dot and svg: ns, us, ms or s")
	short := fs.Bool("short-labels", false, "leave package names out of the labels (Kieker's --short-labels)")
	selfLoops := fs.Bool("self-loops", false, "draw calls within a node as edges to itself (Kieker's --include-self-loops)")
	invalid := fs.Bool("include-invalid", false, "keep the traces Kieker drops as invalid, as far as they were assembled")
	window := fs.Duration("window", time.Hour, "a trace is complete when none of its records came for this long, in the records' own time (Kieker waits for a trace to be complete; a shorter window saves memory but may cut long calls off)")
	outFile := fs.String("o", "", "write to `FILE` instead of standard output")
	loc := addStoreFlags(fs, "", "analyse the traces of this trace store (Kieker, OTLP and zorka traces; also of a bridge that is running) instead of logs")
	storeDir := &loc.loc
	since := fs.String("since", "", "with --store: traces that started at or after this time (RFC 3339 or relative: 15m, 2h, 7d)")
	until := fs.String("until", "", "with --store: traces that started at or before this time")
	var hosts repeatFlag
	fs.Var(&hosts, "host", "with --store: traces with a span on this host (repeatable)")
	skipBad := skipBadFlag(fs)
	libs := libsFlag(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 && *storeDir == "" {
		return usagef("analyze: no log directory given (or --store DIR)")
	}
	if len(pos) > 0 && *storeDir != "" {
		return usagef("analyze: give log directories or --store, not both")
	}
	ko := kiekerOut{exec: *execTraces, msg: *msgTraces, sys: *sysModel}
	if *equiv != "" {
		if ko.equiv, err = equivalence.ParseMode(*equiv); err != nil {
			return usagef("analyze: --equivalence-classes: %v", err)
		}
	}
	if *seqDiag != "" {
		mode, id, _ := strings.Cut(*seqDiag, ":")
		if ko.seq, err = sequence.ParseMode(mode); err != nil {
			return usagef("analyze: --sequence-diagram: %v", err)
		}
		ko.seqID, ko.short = id, *short
		if ko.seqID == "" && *outFile == "" {
			return usagef("analyze: --sequence-diagram %s writes a diagram per trace: name a directory with -o (or one trace: %s:TRACEID)", mode, mode)
		}
		if *picMacros != "" {
			b, err := os.ReadFile(*picMacros)
			if err != nil {
				return usagef("analyze: --pic-macros: %v", err)
			}
			ko.macros = strings.TrimSuffix(string(b), "\n")
		}
	}
	if n := btoi(*graphName != "") + btoi(*stats) + ko.count(); n != 1 {
		return usagef("analyze: give one of --graph G, --stats, --execution-traces, --message-traces, --equivalence-classes, --sequence-diagram, --system-model")
	}
	if *window <= 0 {
		return usagef("analyze: --window must be positive")
	}
	switch *unit {
	case "ns", "us", "ms", "s":
	default:
		return usagef("analyze: --time-unit must be ns, us, ms or s")
	}
	var kind analysis.Kind
	var treeID string
	if *graphName != "" {
		name := *graphName
		if id, ok := strings.CutPrefix(name, "call-tree:"); ok {
			name, treeID = "call-tree", id
			if treeID == "" {
				return usagef("analyze: --graph call-tree:TRACEID needs a trace id")
			}
		}
		if kind, err = analysis.ParseKind(name); err != nil {
			return usagef("analyze: --graph: %v", err)
		}
		if kind == analysis.CallTree && treeID == "" {
			return usagef("analyze: --graph call-tree needs a trace id: call-tree:TRACEID")
		}
		switch *format {
		case "":
			*format = "dot"
		case "dot", "json", "svg":
		default:
			return usagef("analyze: --format must be dot, json or svg for a graph")
		}
	} else if ko.seq != 0 {
		switch *format {
		case "":
			*format = "pic"
		case "pic", "svg", "json":
		default:
			return usagef("analyze: --format must be pic, svg or json for a sequence diagram")
		}
	} else if ko.count() > 0 {
		switch *format {
		case "":
			*format = "text"
			if ko.sys {
				*format = "html"
			}
		case "text", "json", "html":
		default:
			return usagef("analyze: --format must be text (html for --system-model) or json")
		}
	} else {
		switch *format {
		case "":
			*format = "table"
		case "table", "json":
		default:
			return usagef("analyze: --format must be table or json with --stats")
		}
	}
	cat, err := loadCatalog(*libs)
	if err != nil {
		return err
	}

	if (ko.count() > 0) && *storeDir == "" && !*invalid {
		// Kieker's own reconstruction, streaming (assembled traces for
		// --store and --include-invalid).
		return ko.fromLogs(ctx, pos, kiekerlog.Options{Catalog: cat, SkipBad: *skipBad}, *format, *outFile, stdout, stderr)
	}
	opt := analysis.Options{IncludeInvalid: *invalid}
	an := analysis.New(opt)
	model := sysmodel.New()
	kiekerNames := kind != analysis.CallTree && (*format == "dot" || *format == "svg")
	if ko.count() > 0 || kiekerNames {
		// Kieker's @N numbering of assembly components for the labels.
		an.Each = model.Add
	}
	finder := analysis.TreeFinder{ID: treeID, Options: opt}
	emit := an.Add
	if kind == analysis.CallTree {
		emit = finder.Add
	}
	asm := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Window: *window, Emit: emit})
	feed := pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		asm.AddBatch(b)
		asm.Tick()
		return nil
	})
	if *storeDir != "" {
		if err := analyzeStore(ctx, loc, *since, *until, hosts, emit); err != nil {
			return err
		}
		pos = []string{"the store " + *storeDir}
	}
	skips := &skipReporter{w: stderr}
	var sum kiekerlog.Stats
	for _, p := range pos {
		if *storeDir != "" {
			break
		}
		r, err := kiekerlog.Open(p, kiekerlog.Options{Catalog: cat, SkipBad: *skipBad, OnSkip: skips.report})
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

	var out bytes.Buffer
	switch {
	case ko.seq != 0:
		done, err := ko.sequences(&out, model.Finish(), *format, *outFile)
		if err != nil {
			return err
		}
		if done { // written into the directory
			reportAnalysis(stderr, an.Summary(), asm.Stats().Untraced)
			return nil
		}
	case ko.count() > 0:
		if err := ko.write(&out, model, *format == "json"); err != nil {
			return err
		}
	case *stats:
		if err := analysis.WriteOperations(&out, an.Operations(), *format == "json"); err != nil {
			return err
		}
	default:
		var g *analysis.Graph
		if kind == analysis.CallTree {
			if finder.Tree == nil {
				if finder.Invalid != nil {
					return fmt.Errorf("analyze: trace %s is invalid for Kieker's trace analysis: %s (--include-invalid draws it anyway)", treeID, finder.Invalid.Reason)
				}
				return fmt.Errorf("analyze: no trace %s in %s", treeID, strings.Join(pos, ", "))
			}
			g = analysis.TraceCallTree(finder.Tree)
		} else if g, err = an.Graph(kind); err != nil {
			return err
		}
		if !*selfLoops {
			g = g.WithoutSelfLoops()
		}
		if !*respTimes {
			g = g.WithoutStats()
		}
		dopt := analysis.DOTOptions{ShortLabels: *short, Unit: *unit}
		if kiekerNames {
			model.Finish()
			dopt.AssemblyNames = model.Repo.AssemblyNames()
		}
		err := analysis.WriteGraph(ctx, &out, g, *format, dopt)
		if errors.Is(err, analysis.ErrNoDot) {
			return withCode(exitConfig, err)
		}
		if err != nil {
			return err
		}
	}
	if kind != analysis.CallTree {
		reportAnalysis(stderr, an.Summary(), asm.Stats().Untraced)
	}
	if *outFile == "" {
		_, err = stdout.Write(out.Bytes())
		return err
	}
	return os.WriteFile(*outFile, out.Bytes(), 0o644)
}

// reportAnalysis says on stderr how many traces were analysed and which
// were left out.
func reportAnalysis(w io.Writer, s analysis.Summary, untraced int64) {
	if untraced > 0 {
		fmt.Fprintf(w, "tracebridge: %d OperationExecutionRecords have traceId -1 and belong to no trace (Kieker finds no valid trace in them)\n", untraced)
	}
	fmt.Fprintf(w, "tracebridge: analysed %d traces (%d calls)", s.Messages, s.Calls)
	if s.Invalid == 0 {
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "; left out %d invalid traces as Kieker's trace analysis does (--include-invalid keeps them)\n", s.Invalid)
	for i, v := range s.InvalidList {
		if i == 5 {
			fmt.Fprintf(w, "tracebridge: (%d more invalid traces not shown)\n", s.Invalid-5)
			break
		}
		fmt.Fprintf(w, "tracebridge: invalid: %s\n", v)
	}
}
