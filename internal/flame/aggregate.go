package flame

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Aggregator collects stack samples from records into one Stacks per
// group and time window. Its zero value aggregates JFR execution samples
// (jdk.ExecutionSample, field stackTrace) into one profile, without line
// numbers.
type Aggregator struct {
	// Kind, when set, says which event types count and how they weigh
	// (Types is then not used).
	Kind *Kind
	// Types are the record types holding samples (default
	// jdk.ExecutionSample), each counting 1; records of other types are
	// ignored.
	Types []string
	// StackField is the string-array field with the frames, top first
	// (default "stackTrace").
	StackField string
	// Group names the profile a record belongs to (a thread: ByField
	// ("sampledThread"); a host). Nil: one profile, group "".
	Group func(r *record.Record) string
	// Window cuts profiles by the records' logging timestamps (epoch
	// nanoseconds). Zero: one window.
	Window time.Duration
	// Frame transforms each frame (default TrimLine, so that samples of a
	// method on different lines add up). Use Identity to keep lines.
	Frame func(string) string
	// MaxStacks bounds the distinct stacks of each profile.
	MaxStacks int
	// MaxProfiles bounds the profiles kept (default 10,000); samples of
	// further groups or windows are dropped and counted in Dropped.
	MaxProfiles int

	profiles map[profileKey]*Profile
	classes  ClassNames
	types    map[*record.Type]typeInfo
	Dropped  int64
}

// Profile is the stacks of one group in one window.
type Profile struct {
	Group string
	// Start and End bound the window (epoch nanoseconds); both 0 without
	// windows.
	Start, End int64
	Stacks     *Stacks
}

type profileKey struct {
	group string
	start int64
}

// ByField groups by a field's value as text (a thread's name:
// "sampledThread"; for JFR, "sampledThread.javaThreadId" tells apart
// threads of the same name).
func ByField(name string) func(*record.Record) string {
	return func(r *record.Record) string {
		i := r.Type.FieldIndex(name)
		if i < 0 {
			return ""
		}
		f := r.Type.Fields[i]
		if f.Array {
			return ""
		}
		return r.Values[i].Format(f.Kind)
	}
}

// TrimLine drops a trailing " line: N" from a JFR frame.
func TrimLine(frame string) string {
	if i := strings.LastIndex(frame, " line: "); i >= 0 {
		return frame[:i]
	}
	return frame
}

// Identity keeps frames as they are.
func Identity(frame string) string { return frame }

// Consume adds the samples of b. It keeps no reference to b.
func (a *Aggregator) Consume(_ context.Context, b *record.Batch) error {
	for i := range b.Records {
		a.Add(&b.Records[i])
	}
	return nil
}

// typeInfo is where a record type keeps its stack, weight and label
// (field indexes; stack -1: not a sample type, weight and label -1: none).
type typeInfo struct{ stack, weight, label int }

// Add adds one record's sample (if it is one). It allocates nothing for
// a stack already counted in the record's profile.
func (a *Aggregator) Add(r *record.Record) {
	ti := a.typeInfo(r.Type)
	if ti.stack < 0 {
		return
	}
	l := r.Values[ti.stack].List()
	if l == nil {
		return
	}
	n := int64(1)
	if ti.weight >= 0 {
		if n = r.Values[ti.weight].Int(); n <= 0 {
			return
		}
	}
	key := profileKey{}
	if a.Group != nil {
		key.group = a.Group(r)
	}
	if a.Window > 0 && r.LoggingTimestamp != record.NoTimestamp {
		w := int64(a.Window)
		key.start = r.LoggingTimestamp - ((r.LoggingTimestamp%w)+w)%w
	}
	p := a.profiles[key]
	if p == nil {
		max := a.MaxProfiles
		if max <= 0 {
			max = 10_000
		}
		if len(a.profiles) >= max {
			a.Dropped++
			return
		}
		if a.profiles == nil {
			a.profiles = map[profileKey]*Profile{}
		}
		p = &Profile{Group: key.group, Stacks: &Stacks{MaxStacks: a.MaxStacks}}
		if a.Window > 0 {
			p.Start, p.End = key.start, key.start+int64(a.Window)
		}
		a.profiles[key] = p
	}
	frame := a.Frame
	if frame == nil {
		frame = TrimLine
	}
	st := p.Stacks
	st.buf = st.buf[:0]
	for j := len(l.Items) - 1; j >= 0; j-- {
		if j < len(l.Items)-1 {
			st.buf = append(st.buf, ';')
		}
		st.buf = appendFrame(st.buf, frame(l.Items[j].Str()))
	}
	if ti.label >= 0 {
		if label := r.Values[ti.label].Str(); label != "" {
			if len(st.buf) > 0 {
				st.buf = append(st.buf, ';')
			}
			st.buf = appendFrame(st.buf, a.classes.Java(label))
		}
	}
	st.add(st.buf, n)
}

func (a *Aggregator) typeInfo(t *record.Type) typeInfo {
	if ti, ok := a.types[t]; ok {
		return ti
	}
	if a.types == nil {
		a.types = map[*record.Type]typeInfo{}
	}
	var events []KindEvent
	if a.Kind != nil {
		events = a.Kind.Events
	} else {
		types := a.Types
		if len(types) == 0 {
			types = []string{"jdk.ExecutionSample"}
		}
		for _, name := range types {
			events = append(events, KindEvent{Type: name})
		}
	}
	field := a.StackField
	if field == "" {
		field = "stackTrace"
	}
	ti := typeInfo{-1, -1, -1}
	for _, e := range events {
		if e.Type != t.Name {
			continue
		}
		j := t.FieldIndex(field)
		if j < 0 || !t.Fields[j].Array || t.Fields[j].Kind != record.String {
			break
		}
		ti.stack = j
		if e.Weight != "" {
			w := t.FieldIndex(e.Weight)
			if w < 0 || t.Fields[w].Array || !integral(t.Fields[w].Kind) {
				ti.stack = -1 // no weight: nothing to add
				break
			}
			ti.weight = w
		}
		if e.Label != "" {
			if j := t.FieldIndex(e.Label); j >= 0 && !t.Fields[j].Array && t.Fields[j].Kind == record.String {
				ti.label = j
			}
		}
		break
	}
	a.types[t] = ti
	return ti
}

// ClassNames converts class names as JavaClassName does, each array
// name once (up to 10,000 of them, then it starts over): a label costs no
// allocation per event. Its zero value is ready; one goroutine uses it.
type ClassNames struct {
	arrays map[string]string // "[Ljava.lang.Object;" → "java.lang.Object[]"
}

// Java gives a class name as Java source writes it: arrays ("[B",
// "[[Ljava.lang.String;", as Class.getName() gives them) become "byte[]",
// "java.lang.String[][]".
func (c *ClassNames) Java(name string) string {
	if name == "" || name[0] != '[' {
		return name
	}
	if s, ok := c.arrays[name]; ok {
		return s
	}
	if c.arrays == nil || len(c.arrays) >= 10_000 {
		c.arrays = map[string]string{}
	}
	s := JavaClassName(name)
	c.arrays[name] = s
	return s
}

// JavaClassName turns a name Class.getName() gives into the name Java
// source uses ("[I" → "int[]", "[Lp.C;" → "p.C[]"); other names, and
// malformed array names, are returned as they are.
func JavaClassName(name string) string {
	dims := 0
	for dims < len(name) && name[dims] == '[' {
		dims++
	}
	if dims == 0 || dims == len(name) {
		return name
	}
	elem := name[dims:]
	switch {
	case elem[0] == 'L' && strings.HasSuffix(elem, ";") && len(elem) > 2:
		elem = elem[1 : len(elem)-1]
	case len(elem) == 1:
		p, ok := primitives[elem[0]]
		if !ok {
			return name
		}
		elem = p
	default:
		return name
	}
	return elem + strings.Repeat("[]", dims)
}

var primitives = map[byte]string{'Z': "boolean", 'B': "byte", 'C': "char", 'S': "short", 'I': "int", 'J': "long", 'F': "float", 'D': "double"}

// integral reports whether a field of kind k holds an integer.
func integral(k record.Kind) bool {
	switch k {
	case record.Byte, record.Short, record.Int, record.Long:
		return true
	}
	return false
}

// Profiles returns the profiles, by group, then window.
func (a *Aggregator) Profiles() []*Profile {
	out := make([]*Profile, 0, len(a.profiles))
	for _, p := range a.profiles {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Start < out[j].Start
	})
	return out
}

// Merged returns all samples in one Stacks.
func (a *Aggregator) Merged() *Stacks {
	s := &Stacks{MaxStacks: a.MaxStacks}
	for _, p := range a.profiles {
		s.Merge(p.Stacks)
	}
	return s
}

// Reset forgets every profile.
func (a *Aggregator) Reset() {
	clear(a.profiles)
	a.Dropped = 0
}
