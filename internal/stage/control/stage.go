// Package control is the control stage: it applies the settings of the
// bridge's remote control (internal/control: record types and hosts
// switched off, types sampled) to every batch, before the other stages
// and every sink.
//
// Concurrency: the stage runs on the engine's drain goroutine; it reads
// the settings with one atomic load a batch.
package control

import (
	"context"
	"path/filepath"

	ctl "github.com/tracebridge/tracebridge/internal/control"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Type is the stage type this package builds.
const Type = "control"

// FactoryConfig is the YAML configuration of a control stage (serve adds
// one, first, when the top-level stream is on).
type FactoryConfig struct {
	// StateFile keeps the settings (default <data_dir>/control.json).
	StateFile string `yaml:"state_file"`
	// ProbeControllers are the Kieker TCP controllers of monitored
	// programs that probe commands go to.
	ProbeControllers []ctl.Probe `yaml:"probe_controllers"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error { return ctl.ValidateProbes(c.ProbeControllers) }

// Factory returns the factory of control stages.
func Factory() pipeline.StageFactory {
	return pipeline.NewStageFactory(Type, func() *FactoryConfig { return &FactoryConfig{} },
		func(c *FactoryConfig, set pipeline.Settings) (pipeline.Stage, error) {
			file := c.StateFile
			if file == "" {
				file = filepath.Join(set.DataDir, "control.json")
			}
			cl, err := ctl.Shared(set.Shared, ctl.Options{StateFile: file, Catalog: set.Catalog, Probes: c.ProbeControllers, Logger: set.Logger})
			if err != nil {
				return nil, pipeline.Classify(pipeline.ErrConfig, err)
			}
			return Stage(cl), nil
		})
}

// Stage returns the stage that applies c's settings.
func Stage(c *ctl.Controller) pipeline.Stage {
	return func(next pipeline.Consumer) pipeline.Consumer {
		f := &filter{c: c, next: next}
		f.emit, _ = next.(pipeline.Emitter)
		return f
	}
}

// filter drops the records the settings switch off, in place. It runs on
// the drain goroutine only.
type filter struct {
	c    *ctl.Controller
	next pipeline.Consumer
	emit pipeline.Emitter

	rules *ctl.Rules                 // the settings the cache is for
	cache map[*record.Type]*typeRule // per type, for rules
	hostF map[*record.Type]int       // index of a string field hostname, or -1
}

type typeRule struct {
	drop  bool
	rate  float64 // 0: not sampled
	trace int     // index of a long field traceId, or -1
	acc   float64
}

var (
	_ pipeline.Consumer = (*filter)(nil)
	_ pipeline.Emitter  = (*filter)(nil)
)

func (f *filter) Consume(ctx context.Context, b *record.Batch) error {
	f.apply(b)
	return f.next.Consume(ctx, b)
}

// Emit filters b and hands it on without a copy when the next consumer
// takes batches over (the engine's fan-out does).
func (f *filter) Emit(ctx context.Context, b *record.Batch) (*record.Batch, error) {
	f.apply(b)
	if f.emit != nil {
		return f.emit.Emit(ctx, b)
	}
	return b, f.next.Consume(ctx, b)
}

func (f *filter) apply(b *record.Batch) {
	r := f.c.Rules()
	if r == nil || r.Empty() || b.Len() == 0 {
		return
	}
	if r != f.rules {
		f.rules, f.cache = r, map[*record.Type]*typeRule{}
	}
	if b.Origin.Host != "" && r.Hosts[b.Origin.Host] {
		b.Truncate(0)
		return
	}
	perRecordHost := b.Origin.Host == "" && len(r.Hosts) > 0
	out := b.Records[:0]
	for i := range b.Records {
		rec := &b.Records[i]
		tr := f.rule(rec.Type)
		keep := !tr.drop
		if keep && perRecordHost {
			if j := f.hostField(rec.Type); j >= 0 && r.Hosts[rec.Values[j].Str()] {
				keep = false
			}
		}
		if keep && tr.rate > 0 {
			keep = tr.sample(rec)
		}
		if keep {
			out = append(out, *rec)
		}
	}
	clear(b.Records[len(out):])
	b.Records = out
}

func (f *filter) rule(t *record.Type) *typeRule {
	if tr := f.cache[t]; tr != nil {
		return tr
	}
	tr := &typeRule{drop: f.rules.Types[t.Name], rate: f.rules.Samples[t.Name], trace: -1}
	if j := t.FieldIndex("traceId"); j >= 0 && t.Fields[j].Kind == record.Long && !t.Fields[j].Array {
		tr.trace = j
	}
	f.cache[t] = tr
	return tr
}

func (f *filter) hostField(t *record.Type) int {
	if j, ok := f.hostF[t]; ok {
		return j
	}
	if f.hostF == nil {
		f.hostF = map[*record.Type]int{}
	}
	j := t.FieldIndex("hostname")
	if j >= 0 && (t.Fields[j].Kind != record.String || t.Fields[j].Array) {
		j = -1
	}
	f.hostF[t] = j
	return j
}

// sample decides whether a record of a sampled type is kept: by its trace
// id where it has one (so a trace's records of the type are kept or
// dropped together, and bridges agree), else every 1/rate-th record.
func (tr *typeRule) sample(r *record.Record) bool {
	if tr.trace >= 0 && tr.trace < len(r.Values) {
		return float64(trace.Mix(uint64(r.Values[tr.trace].Int())))/(1<<64) < tr.rate
	}
	tr.acc += tr.rate
	if tr.acc >= 1-1e-9 { // 10 × 0.1 is a little less than 1
		tr.acc--
		return true
	}
	return false
}
