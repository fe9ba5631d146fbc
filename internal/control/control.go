// Package control is remote control of what a bridge records (JFR's
// enable, disable and settings): a Controller holds the settings (record
// types and hosts switched off, types sampled), keeps them in a file so
// they survive a restart, applies commands and sends probe
// (de)activations to monitored programs.
//
// Two components use it: the control stage (internal/stage/control)
// applies the settings to every batch before the other stages and every
// sink; the stream sink (internal/sink/stream) receives the commands over
// NATS, checks who sends them, and announces every change in the stream's
// metadata. Both find the bridge's Controller in pipeline.Shared (Shared,
// Lookup).
//
// Concurrency: a Controller is safe for concurrent use; its Rules are
// read through an atomic pointer (a batch costs one load when nothing is
// switched off).
package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// ErrCommand is wrapped by the errors of malformed or impossible
// commands.
var ErrCommand = errors.New("control command")

// Probe says how to reach the probe controllers of monitored programs.
type Probe struct {
	// Host is the monitored host (Kieker's hostname) of the program.
	Host string `yaml:"host"`
	// Address is host:port of the program's Kieker TCP controller
	// (kieker.monitoring.tcp.activate=true with its remote port).
	Address string `yaml:"address"`
}

// Options configure a Controller.
type Options struct {
	// StateFile keeps the settings ("" keeps them in memory only).
	StateFile string
	// Catalog resolves type names (short names too).
	Catalog *record.Catalog
	// Probes are the monitored programs' probe controllers.
	Probes []Probe
	// DialTimeout bounds sending a probe command (default 3 s).
	DialTimeout time.Duration
	Logger      *slog.Logger
}

// Controller holds the control settings.
type Controller struct {
	opt Options

	mu       sync.Mutex
	state    streammsg.ControlState
	known    func() []string
	onChange []func(old, now streammsg.ControlState)

	rules atomic.Pointer[Rules]
}

// Rules are the settings in the form the control stage applies them.
// They are read-only: a change installs new Rules.
type Rules struct {
	Types   map[string]bool // disabled, by full name
	Hosts   map[string]bool
	Samples map[string]float64 // sampling rate, by full type name
}

// Empty reports whether the rules switch nothing off.
func (r *Rules) Empty() bool { return len(r.Types) == 0 && len(r.Hosts) == 0 && len(r.Samples) == 0 }

// Rules returns the settings now in force (a new value after every
// change, so a user may cache what it derives from them by pointer).
func (c *Controller) Rules() *Rules { return c.rules.Load() }

// Open returns a controller with the settings of opt.StateFile (none when
// the file does not exist yet).
func Open(opt Options) (*Controller, error) {
	if opt.Catalog == nil {
		opt.Catalog = record.Builtin()
	}
	if opt.DialTimeout <= 0 {
		opt.DialTimeout = 3 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Controller{opt: opt}
	if opt.StateFile != "" {
		b, err := os.ReadFile(opt.StateFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("control state: %w", err)
		default:
			if err := json.Unmarshal(b, &c.state); err != nil {
				return nil, fmt.Errorf("control state %s: %w", opt.StateFile, err)
			}
		}
	}
	c.install()
	return c, nil
}

type sharedKey struct{}

// Shared returns the bridge's controller, opening it with opt the first
// time.
func Shared(sh *pipeline.Shared, opt Options) (*Controller, error) {
	var err error
	v := sh.Value(sharedKey{}, func() any {
		var c *Controller
		c, err = Open(opt)
		return c
	})
	if err != nil {
		return nil, err
	}
	return v.(*Controller), nil
}

// Lookup returns the bridge's controller, or nil when it has none.
func Lookup(sh *pipeline.Shared) *Controller {
	c, _ := sh.Value(sharedKey{}, nil).(*Controller)
	return c
}

// SetKnownTypes gives the controller the names of the types the bridge
// has seen besides its catalogue (types made at run time, such as JFR's),
// so commands may name them.
func (c *Controller) SetKnownTypes(fn func() []string) {
	c.mu.Lock()
	c.known = fn
	c.mu.Unlock()
}

// OnChange registers fn, called after every change with the settings
// before and after it (on the goroutine that applied the command).
func (c *Controller) OnChange(fn func(old, now streammsg.ControlState)) {
	c.mu.Lock()
	c.onChange = append(c.onChange, fn)
	c.mu.Unlock()
}

// State returns a copy of the settings.
func (c *Controller) State() streammsg.ControlState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Clone()
}

// Apply carries out a command. Status changes nothing; the others change
// the settings, save them, and tell OnChange's functions. An error wraps
// ErrCommand when the command itself is wrong.
func (c *Controller) Apply(req streammsg.ControlRequest) (string, error) {
	return c.applyReq(req, true)
}

// ApplyExact carries out a command decided elsewhere (another node of a
// cluster), as Apply does, but takes type names as they are: the node
// that decided it resolved them, and this one may not have seen the type.
func (c *Controller) ApplyExact(req streammsg.ControlRequest) (string, error) {
	return c.applyReq(req, false)
}

func (c *Controller) applyReq(req streammsg.ControlRequest, resolve bool) (string, error) {
	c.mu.Lock()
	old := c.state.Clone()
	msg, changed, err := c.apply(req, resolve)
	if err != nil || !changed {
		c.mu.Unlock()
		return msg, err
	}
	c.state.Changes++
	c.state.Changed = time.Now().UnixNano()
	if err := c.save(); err != nil {
		c.state = old
		c.mu.Unlock()
		return "", err
	}
	c.install()
	now := c.state.Clone()
	fns := slices.Clone(c.onChange)
	c.mu.Unlock()
	for _, fn := range fns {
		fn(old, now)
	}
	return msg, nil
}

func (c *Controller) apply(req streammsg.ControlRequest, resolve bool) (msg string, changed bool, err error) {
	st := &c.state
	resolveName := c.resolve
	if !resolve {
		resolveName = func(name string) (string, error) { return name, nil }
	}
	switch req.Op {
	case streammsg.OpStatus:
		return "", false, nil
	case streammsg.OpEnable, streammsg.OpDisable:
		on := req.Op == streammsg.OpEnable
		switch {
		case req.Host != "" && req.Type != "":
			return "", false, fmt.Errorf("%w: %s takes a type or a host, not both", ErrCommand, req.Op)
		case req.Host != "":
			changed = setMember(&st.DisabledHosts, req.Host, !on)
			return fmt.Sprintf("host %s %sd", req.Host, req.Op), changed, nil
		case req.Type != "":
			name, err := resolveName(req.Type)
			if err != nil {
				return "", false, err
			}
			changed = setMember(&st.DisabledTypes, name, !on)
			return fmt.Sprintf("type %s %sd", name, req.Op), changed, nil
		}
		return "", false, fmt.Errorf("%w: %s needs a record type or host:NAME", ErrCommand, req.Op)
	case streammsg.OpSample:
		if req.Type == "" {
			return "", false, fmt.Errorf("%w: sample needs a record type", ErrCommand)
		}
		if !(req.Rate > 0 && req.Rate <= 1) || math.IsNaN(req.Rate) {
			return "", false, fmt.Errorf("%w: sample rate %v: want a share above 0 and at most 1 (0.1 or 10%%; 1 ends sampling)", ErrCommand, req.Rate)
		}
		name, err := resolveName(req.Type)
		if err != nil {
			return "", false, err
		}
		i := slices.IndexFunc(st.Samples, func(s streammsg.Sample) bool { return s.Type == name })
		switch {
		case req.Rate == 1 && i < 0:
			return fmt.Sprintf("type %s is not sampled", name), false, nil
		case req.Rate == 1:
			st.Samples = slices.Delete(st.Samples, i, i+1)
			return fmt.Sprintf("type %s no longer sampled", name), true, nil
		case i >= 0 && st.Samples[i].Rate == req.Rate:
			return fmt.Sprintf("type %s sampled at %v already", name, req.Rate), false, nil
		case i >= 0:
			st.Samples[i].Rate = req.Rate
		default:
			st.Samples = append(st.Samples, streammsg.Sample{Type: name, Rate: req.Rate})
			sort.Slice(st.Samples, func(a, b int) bool { return st.Samples[a].Type < st.Samples[b].Type })
		}
		return fmt.Sprintf("type %s sampled at %v", name, req.Rate), true, nil
	case streammsg.OpProbe:
		if strings.TrimSpace(req.Pattern) == "" {
			return "", false, fmt.Errorf("%w: probe needs a pattern (Kieker's, e.g. 'public void org.app.Shop.buy(..)' or '*')", ErrCommand)
		}
		p, err := c.sendProbe(req)
		if err != nil {
			return "", false, err
		}
		i := slices.IndexFunc(st.Probes, func(x streammsg.Probe) bool { return x.Host == p.Host && x.Pattern == p.Pattern })
		if i >= 0 {
			st.Probes[i] = p
		} else {
			st.Probes = append(st.Probes, p)
		}
		op := "deactivated"
		if p.Active {
			op = "activated"
		}
		msg := fmt.Sprintf("probe pattern %q %s on %d controller(s)", p.Pattern, op, p.Sent)
		if p.Error != "" {
			msg += "; " + p.Error
		}
		return msg, true, nil
	case "":
		return "", false, fmt.Errorf("%w: no operation (want status, enable, disable, sample or probe)", ErrCommand)
	}
	return "", false, fmt.Errorf("%w: unknown operation %q (want status, enable, disable, sample or probe)", ErrCommand, req.Op)
}

// resolve maps a full or short type name to a full name the bridge
// knows.
func (c *Controller) resolve(name string) (string, error) {
	known := map[string]bool{}
	for _, t := range c.opt.Catalog.Types() {
		known[t.Name] = true
	}
	if c.known != nil {
		for _, n := range c.known() {
			known[n] = true
		}
	}
	if known[name] {
		return name, nil
	}
	if t := c.opt.Catalog.Lookup(name); t != nil { // a legacy name
		return t.Name, nil
	}
	var matches []string
	for n := range known {
		if n[strings.LastIndexByte(n, '.')+1:] == name {
			matches = append(matches, n)
		}
	}
	sort.Strings(matches)
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return "", fmt.Errorf("%w: unknown record type %q (not in the bridge's catalogue, and the bridge has not received it)", ErrCommand, name)
	}
	return "", fmt.Errorf("%w: record type %q is ambiguous: %s", ErrCommand, name, strings.Join(matches, ", "))
}

func setMember(list *[]string, v string, in bool) bool {
	i := slices.Index(*list, v)
	switch {
	case in && i < 0:
		*list = append(*list, v)
		sort.Strings(*list)
		return true
	case !in && i >= 0:
		*list = slices.Delete(*list, i, i+1)
		return true
	}
	return false
}

// save writes the settings (a new file renamed over the old one).
func (c *Controller) save() error {
	if c.opt.StateFile == "" {
		return nil
	}
	b, err := json.MarshalIndent(&c.state, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.opt.StateFile), 0o755); err != nil {
		return fmt.Errorf("control state: %w", err)
	}
	tmp := c.opt.StateFile + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("control state: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.opt.StateFile)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("control state: %w", err)
	}
	return nil
}

// install makes the settings the Rules in force.
func (c *Controller) install() {
	r := &Rules{Types: map[string]bool{}, Hosts: map[string]bool{}, Samples: map[string]float64{}}
	for _, t := range c.state.DisabledTypes {
		r.Types[t] = true
	}
	for _, h := range c.state.DisabledHosts {
		r.Hosts[h] = true
	}
	for _, s := range c.state.Samples {
		r.Samples[s.Type] = s.Rate
	}
	c.rules.Store(r)
}
