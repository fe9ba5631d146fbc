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
	// Types are the record types holding samples (default
	// jdk.ExecutionSample); records of other types are ignored.
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
	types    map[*record.Type]int // stack field index, -1: not a sample type
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

// Add adds one record's sample (if it is one).
func (a *Aggregator) Add(r *record.Record) {
	idx := a.stackIndex(r.Type)
	if idx < 0 {
		return
	}
	l := r.Values[idx].List()
	if l == nil {
		return
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
	st.add(st.buf, 1)
}

func (a *Aggregator) stackIndex(t *record.Type) int {
	if i, ok := a.types[t]; ok {
		return i
	}
	if a.types == nil {
		a.types = map[*record.Type]int{}
	}
	types := a.Types
	if len(types) == 0 {
		types = []string{"jdk.ExecutionSample"}
	}
	field := a.StackField
	if field == "" {
		field = "stackTrace"
	}
	i := -1
	for _, name := range types {
		if name == t.Name {
			if j := t.FieldIndex(field); j >= 0 && t.Fields[j].Array && t.Fields[j].Kind == record.String {
				i = j
			}
		}
	}
	a.types[t] = i
	return i
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
