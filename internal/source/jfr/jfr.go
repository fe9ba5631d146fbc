package jfr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tracebridge/tracebridge/internal/backoff"
	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Start says where following begins.
type Start int

const (
	// StartNewest skips the data that exists when Run starts: events
	// written from then on are read.
	StartNewest Start = iota
	// StartBeginning reads everything the path holds first.
	StartBeginning
)

// ParseStart maps "newest" or "beginning" to a Start.
func ParseStart(s string) (Start, error) {
	switch s {
	case "", "newest", "end", "latest":
		return StartNewest, nil
	case "beginning", "begin", "oldest":
		return StartBeginning, nil
	}
	return 0, fmt.Errorf("%w: start %q (newest or beginning)", ErrConfig, s)
}

func (s Start) String() string {
	if s == StartBeginning {
		return "beginning"
	}
	return "newest"
}

// Defaults of Config.
const (
	DefaultName         = "jfr"
	DefaultPollInterval = 100 * time.Millisecond
	DefaultBatchSize    = 1024
	DefaultStaleAfter   = 30 * time.Second
)

// ErrConfig marks an invalid configuration.
var ErrConfig = errors.New("invalid jfr configuration")

// Config is the user's configuration of a Source. Zero values select the
// defaults.
type Config struct {
	// Name identifies the source in logs (key receiver).
	Name string
	// Path is a .jfr file, a JVM's repository directory, or a repository
	// root holding JVM directories.
	Path string
	// Follow keeps reading what JVMs write until the context ends.
	Follow bool
	// Start is where following begins (only with Follow).
	Start Start
	// Types selects event types (names, names without package, globs;
	// see internal/codec/jfr.NewFilter); only those are decoded. Empty:
	// all.
	Types []string
	// PollInterval is how often a followed repository is looked at.
	PollInterval time.Duration
	// StaleAfter is how long a chunk of a JVM that is gone may stay
	// unchanged before it is given up.
	StaleAfter time.Duration
	// BatchSize is the number of records handed on at a time.
	BatchSize int
	// Limits bound what a recording may make the reader hold.
	Limits codec.Limits
	// Host names the monitored host in the batches' origin
	// (record.Origin.Host); the jfr receiver sets the machine's host
	// name when the configuration gives none.
	Host string
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.Path == "" {
		return fmt.Errorf("%w: no path", ErrConfig)
	}
	if c.PollInterval < 0 || c.StaleAfter < 0 || c.BatchSize < 0 {
		return fmt.Errorf("%w: negative poll interval, stale time or batch size", ErrConfig)
	}
	if c.Start != StartNewest && c.Start != StartBeginning {
		return fmt.Errorf("%w: start %d", ErrConfig, c.Start)
	}
	if _, err := codec.NewFilter(c.Types...); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return nil
}

// Settings are injected by the program running the source.
type Settings struct {
	Logger  *slog.Logger      // nil: slog.Default()
	Metrics *metrics.Receiver // nil: none
	// OnError hears about every damaged chunk or event (the error names
	// the file, offset and reason). Nil: they are logged, a few a second.
	OnError func(error)
	// Types, when set, is shared with other sources so that an event type
	// gets one *record.Type everywhere.
	Types *codec.TypeSet
}

// Stats count what a Source did.
type Stats struct {
	codec.Stats        // summed over every stream
	Files       int64  // chunk files opened
	Errors      int64  // damaged chunks and events reported
	JVMs        int    // JVM directories being followed
	Records     int64  // records handed on
	Batches     int64  // batches handed on
	LastError   string // the last error reported
}

// Source reads JFR data from one path.
type Source struct {
	cfg    Config
	set    Settings
	log    *slog.Logger
	filter func(string) bool
	types  *codec.TypeSet

	mu    sync.Mutex
	stats Stats
	limit lograte.Limiter
}

// New returns a source for cfg.
func New(cfg Config, set Settings) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	filter, _ := codec.NewFilter(cfg.Types...)
	s := &Source{cfg: cfg, set: set, log: set.Logger, filter: filter, types: set.Types}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("receiver", cfg.Name)
	if s.types == nil {
		s.types = codec.NewTypeSet()
	}
	return s, nil
}

// Stats returns the counts so far.
func (s *Source) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Types returns the record types made so far (a sink that declares types
// can ask after Run).
func (s *Source) Types() []*record.Type { return s.types.Types() }

// report hands a damaged chunk or event to OnError or the log.
func (s *Source) report(err error) {
	s.mu.Lock()
	s.stats.Errors++
	s.stats.LastError = err.Error()
	s.mu.Unlock()
	s.set.Metrics.DecodeError()
	if s.set.OnError != nil {
		s.set.OnError(err)
		return
	}
	s.limit.Log(context.Background(), s.log, slog.LevelWarn, "jfr: damaged data skipped", "err", err)
}

// Run reads (and with Follow, follows) the path and hands records to out.
// See the package comment for what it returns.
func (s *Source) Run(ctx context.Context, out pipeline.Consumer) error {
	r := &run{s: s, ctx: ctx, emitCtx: context.WithoutCancel(ctx), out: out, batch: &record.Batch{}, jvms: map[string]*jvm{}, given: map[string]bool{}, started: time.Now()}
	if e, ok := out.(pipeline.Emitter); ok {
		r.emitter = e
	}
	defer r.closeAll()
	info, err := os.Stat(s.cfg.Path)
	if err != nil && !(s.cfg.Follow && errors.Is(err, fs.ErrNotExist)) {
		return fmt.Errorf("jfr %s: %w", s.cfg.Path, err)
	}
	if err == nil && !info.IsDir() {
		return r.file(s.cfg.Path)
	}
	if !s.cfg.Follow {
		return r.directory()
	}
	return r.follow()
}

// run is the state of one Run.
type run struct {
	s   *Source
	ctx context.Context
	// emitCtx hands batches on after ctx is cancelled too: what was read
	// is not dropped at shutdown.
	emitCtx   context.Context
	origin    record.Origin // of the records being added to batch
	out       pipeline.Consumer
	emitter   pipeline.Emitter
	batch     *record.Batch
	jvms      map[string]*jvm
	given     map[string]bool // directories read to their end that still exist
	started   time.Time
	first     bool        // the first look at the root is done
	waiting   bool        // logged that the root does not exist
	done      codec.Stats // counts of the streams forgotten
	doneFiles int64
}

// emit hands the batch on when it is full, or when force is set and it is
// not empty.
func (r *run) emit(force bool) error {
	n := r.batch.Len()
	if n == 0 || (!force && n < r.s.cfg.BatchSize) {
		return nil
	}
	r.s.set.Metrics.Records(r.batch)
	var err error
	if r.emitter != nil {
		r.batch, err = r.emitter.Emit(r.emitCtx, r.batch)
	} else {
		err = r.out.Consume(r.emitCtx, r.batch)
		r.batch.Reset()
	}
	r.batch.Origin = r.origin
	if err != nil {
		return err
	}
	r.s.mu.Lock()
	r.s.stats.Records += int64(n)
	r.s.stats.Batches++
	r.s.mu.Unlock()
	return nil
}

// read reads what j has now and passes it on.
func (r *run) read(j *jvm) error {
	if err := r.use(j); err != nil {
		return err
	}
	if err := j.poll(r); err != nil {
		return err
	}
	return r.emit(true)
}

// use makes j's the origin of the records added from now on: a batch
// holds the records of one JVM directory (or file).
func (r *run) use(j *jvm) error {
	if r.origin == j.origin {
		return nil
	}
	if err := r.emit(true); err != nil {
		return err
	}
	r.origin = j.origin
	r.batch.Origin = j.origin
	return nil
}

func (r *run) closeAll() {
	for _, j := range r.jvms {
		j.close()
	}
}

// file reads one file: every chunk, or with Follow its live chunk until it
// is finished.
func (r *run) file(path string) error {
	j := r.newJVM(filepath.Dir(path), true)
	j.only = filepath.Base(path)
	j.origin.Peer = path
	if pidOf(j.dir) == 0 {
		j.origin.Session = "" // a recording file: the JVM is not known
	}
	r.jvms[path] = j
	for {
		if err := r.read(j); err != nil {
			return err
		}
		if !r.s.cfg.Follow || j.exhausted {
			r.publish()
			return nil
		}
		if !backoff.Sleep(r.ctx, r.s.cfg.PollInterval) {
			r.publish()
			return nil
		}
	}
}

// directory reads a JVM directory or a root once.
func (r *run) directory() error {
	dirs, err := jvmDirs(r.s.cfg.Path)
	if err != nil {
		return fmt.Errorf("jfr %s: %w", r.s.cfg.Path, err)
	}
	for _, d := range dirs {
		j := r.newJVM(d, true)
		r.jvms[d] = j
		if err := r.read(j); err != nil {
			return err
		}
		r.forget(d)
		r.publish()
	}
	return nil
}

// follow polls the root until the context ends.
func (r *run) follow() error {
	for {
		if err := r.pollRoot(); err != nil {
			return err
		}
		if err := r.emit(true); err != nil {
			return err
		}
		r.publish()
		if !backoff.Sleep(r.ctx, r.s.cfg.PollInterval) {
			return nil
		}
	}
}

func (r *run) pollRoot() error {
	root := r.s.cfg.Path
	dirs, err := jvmDirs(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if !r.waiting {
				r.waiting = true
				r.s.log.Info("jfr: waiting for the repository to appear", "path", root)
			}
			r.first = true
		} else {
			r.s.report(fmt.Errorf("jfr %s: %w", root, err))
		}
	} else {
		if r.waiting {
			r.waiting = false
			r.s.log.Info("jfr: repository appeared", "path", root)
		}
		listed := map[string]bool{}
		for _, d := range dirs {
			listed[d] = true
		}
		for d := range r.given { // forget what was given up once it is gone
			if !listed[d] {
				delete(r.given, d)
			}
		}
		for _, d := range dirs {
			if _, ok := r.jvms[d]; !ok && !r.given[d] {
				fromStart := r.first || r.s.cfg.Start == StartBeginning
				r.jvms[d] = r.newJVM(d, fromStart)
				if r.first {
					r.s.log.Info("jfr: following a new JVM repository", "path", d)
				}
			}
		}
		r.first = true
	}
	// Poll in a stable order (oldest directory first).
	names := make([]string, 0, len(r.jvms))
	for d := range r.jvms {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		j := r.jvms[d]
		if err := r.use(j); err != nil {
			return err
		}
		if err := j.poll(r); err != nil {
			return err
		}
		if j.exhausted {
			r.forget(d)
			// A killed JVM's directory stays: it must not be read again.
			r.given[d] = true
			r.s.log.Info("jfr: JVM repository finished", "path", d)
		}
	}
	return nil
}

// publish copies the streams' counters into the stats.
func (r *run) publish() {
	sum := r.done
	files := r.doneFiles
	for _, j := range r.jvms {
		add(&sum, j.stream.Stats())
		files += j.files
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.stats.Stats = sum
	r.s.stats.Files = files
	r.s.stats.JVMs = len(r.jvms)
}

// forget drops a JVM directory's stream, keeping its counts.
func (r *run) forget(key string) {
	j := r.jvms[key]
	j.close()
	add(&r.done, j.stream.Stats())
	r.doneFiles += j.files
	delete(r.jvms, key)
}

func add(dst *codec.Stats, s codec.Stats) {
	dst.Chunks += s.Chunks
	dst.Events += s.Events
	dst.Filtered += s.Filtered
	dst.Unknown += s.Unknown
	dst.Metadata += s.Metadata
	dst.Checkpoints += s.Checkpoints
	dst.BadEvents += s.BadEvents
	dst.Unresolved += s.Unresolved
	dst.Fallbacks += s.Fallbacks
	dst.BadConstants += s.BadConstants
}

// jvmDirs returns the directories of a root that hold chunk files: the
// root itself when it has .jfr files, and each subdirectory, oldest name
// first (JVM directory names begin with their creation time).
func jvmDirs(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	self := false
	for _, e := range entries {
		switch {
		case e.IsDir():
			out = append(out, filepath.Join(root, e.Name()))
		case strings.HasSuffix(e.Name(), ".jfr"):
			self = true
		}
	}
	sort.Strings(out)
	if self {
		out = append([]string{root}, out...)
	}
	return out, nil
}

// pidOf returns the process id at the end of a JVM directory's name
// (<yyyy_MM_dd_HH_mm_ss>_<pid>, "_<n>" added when taken), or 0.
func pidOf(dir string) int {
	parts := strings.Split(filepath.Base(dir), "_")
	if len(parts) < 7 {
		return 0
	}
	pid, err := strconv.Atoi(parts[6])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// processGone reports whether no process has the pid (on this host's pid
// namespace; a process of another namespace looks gone, which only makes
// a stale chunk end sooner).
func processGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}
