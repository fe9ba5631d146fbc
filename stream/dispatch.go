package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/jsstall"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Limits of a subscriber.
const (
	// metaWait bounds the wait for a metadata version a message needs.
	metaWait = 5 * time.Second
	// maxFilterSubjects: more filters than this subscribe to everything
	// (and filter here).
	maxFilterSubjects = 256
	// idle is how long the dispatcher waits for a message before it
	// looks at metadata, incomplete batches and the end time.
	idle = 100 * time.Millisecond
)

// dispatcher reads the repository and calls the handlers. It runs on
// Start's goroutine only, except that the metadata consumer's callback
// queues new versions (mu).
//
// A repository has one writer — the bridge — or, in a cluster, one per
// node: each with its own metadata (versions, runs, type ids), batches
// and per-subject counts, told apart by the messages' NodeHeader. The
// dispatcher keeps a writer's state for each.
type dispatcher struct {
	s       *Stream
	writers map[string]*writer // by node ("" a bridge that runs alone)
	order   []*writer          // writers in the order they were seen
	cat     *record.Catalog
	in      record.Interner

	mu      sync.Mutex
	pending []*Metadata
	note    chan struct{}

	msg     streammsg.Message
	flushed bool // nothing dispatched since the last OnFlush
	ev      Event
	stop    bool

	// The end time (SetEndTime) of a stream that follows live: once it
	// has passed in wall time (endDue), the stream ends when it has read
	// everything the repository holds, not before (a window in the past
	// can take long to read).
	cons    jetstream.Consumer
	endDue  bool
	lastSeq uint64 // repository sequence of the last message read
	// The consumer (its server name: an ordered consumer's changes when
	// it is made again) and consumer sequence of the last message read.
	lastCons string
	lastDseq uint64

	// The consumer's stall watch (run), and the first consumer's first
	// sequence: a new consumer never begins before it.
	stall    jsstall.Watch
	startSeq uint64
}

// writer is what the dispatcher knows of one writer of the repository.
type writer struct {
	node   string
	md     *Metadata // nil until its metadata is read
	types  map[uint32]*typeEntry
	cur    batchState
	next   map[subjectKey]uint64
	gapRun uint64
	lost   uint64
}

type typeEntry struct {
	info     TypeInfo
	t        *record.Type
	handlers []func(*Event)
	err      error
}

type subjectKey struct {
	id   uint32
	host string
}

// batchState collects the parts of one batch the subscriber wants.
type batchState struct {
	active   bool
	run, ord uint64
	expected int
	parts    []partState
	n        int // parts received
	entries  []entry
}

type partState struct {
	h       streammsg.Header
	pos     []uint32 // h.Positions' memory
	te      *typeEntry
	records record.Batch
	seq     uint64
}

type entry struct {
	pos       uint32
	part, idx int
}

func newDispatcher(s *Stream) *dispatcher {
	return &dispatcher{s: s, writers: map[string]*writer{}, cat: trace.Types(), note: make(chan struct{}, 1), flushed: true}
}

// writer returns the state of node's writer, made on first use.
func (d *dispatcher) writer(node string) *writer {
	w := d.writers[node]
	if w == nil {
		w = &writer{node: node, types: map[uint32]*typeEntry{}, next: map[subjectKey]uint64{}}
		d.writers[node] = w
		d.order = append(d.order, w)
	}
	return w
}

// active reports whether a writer's batch waits for more parts.
func (d *dispatcher) active() bool {
	for _, w := range d.order {
		if w.cur.active {
			return true
		}
	}
	return false
}

// flushAll hands on every writer's waiting batch.
func (d *dispatcher) flushAll() {
	for _, w := range d.order {
		d.flushBatch(w)
	}
}

func (d *dispatcher) run(ctx context.Context) error {
	s := d.s
	mds, metaSeq, err := s.allMetadata(ctx)
	if err != nil {
		return err
	}
	// The metadata handlers hear of it once the consumers exist, so what
	// is published after that is seen.
	for _, md := range mds {
		d.set(md)
	}
	ms, err := s.js.Stream(ctx, s.subj.MetaStream())
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.url, err)
	}
	// Every writer's metadata (the stream holds metadata only).
	mc, err := ms.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: metaSeq + 1})
	if err != nil {
		return fmt.Errorf("stream %s: metadata consumer: %w", s.url, err)
	}
	mcc, err := mc.Consume(func(m jetstream.Msg) {
		md, err := streammsg.UnmarshalMetadata(m.Data())
		d.mu.Lock()
		if err == nil && len(d.pending) < 1024 {
			d.pending = append(d.pending, md)
		}
		d.mu.Unlock()
		select {
		case d.note <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("stream %s: metadata consumer: %w", s.url, err)
	}
	defer func() {
		mcc.Stop()
		jsstall.Drop(context.WithoutCancel(ctx), s.js, s.subj.MetaStream(), mc)
	}()

	ds, err := s.js.Stream(ctx, s.subj.Stream())
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.url, err)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: d.filters(), DeliverPolicy: jetstream.DeliverNewPolicy}
	switch {
	case s.startSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, s.startSeq
	case !s.startTime.IsZero():
		t := s.startTime
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	case s.caughtUp:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	cons, it, err := d.consume(ctx, ds, cfg)
	if err != nil && len(cfg.FilterSubjects) > 1 {
		// Servers before 2.10 take one filter subject: take everything
		// and filter here.
		cfg.FilterSubjects = nil
		cons, it, err = d.consume(ctx, ds, cfg)
	}
	if err != nil {
		return fmt.Errorf("stream %s: consumer: %w", s.url, err)
	}
	if cons == nil {
		return nil // a dump of an empty window
	}
	// The reader's consumers go with it, not at their inactive threshold
	// (5 minutes: a dump, a tail or a browser's live view each left two
	// behind).
	defer func() {
		it.Stop()
		jsstall.Drop(context.WithoutCancel(ctx), s.js, s.subj.Stream(), d.cons)
	}()
	d.cons = cons
	// Where the consumer begins (a start time or the repository's end
	// made into a sequence by the server): a new one never begins before.
	if ci := cons.CachedInfo(); ci != nil {
		d.startSeq = ci.Delivered.Stream + 1
	}
	d.stall.Start(time.Now())
	next := func(ctx context.Context) uint64 { return d.pendingSeq(ctx, ds, cfg.FilterSubjects) }
	for _, md := range mds {
		d.notify(md)
	}
	// The end timer says when the end time has passed in wall time (with
	// a second for the bridge's last batch before it to be stored); what
	// ends the stream then is having read everything (readAll), or the
	// first record published after the end time (handle).
	var endTimer <-chan time.Time
	if !s.endTime.IsZero() && !s.caughtUp {
		t := time.NewTimer(time.Until(s.endTime) + time.Second)
		defer t.Stop()
		endTimer = t.C
	}
	for !d.stop {
		d.applyMeta()
		select {
		case <-ctx.Done():
			d.flushAll()
			return nil
		case <-endTimer:
			endTimer = nil
			d.endDue = true
			if d.readAll(ctx) {
				d.flushAll()
				return nil
			}
		default:
		}
		m, err := it.Next(jetstream.NextMaxWait(idle))
		if err != nil {
			switch {
			case errors.Is(err, natsgo.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
				d.flushAll()
				d.flush()
				if d.endDue && d.readAll(ctx) {
					return nil
				}
				if d.stall.Stalled(ctx, time.Now(), next) {
					// The consumer delivers nothing while the
					// repository's leader holds a message for it (see
					// docs/STREAM.md, "Consumers that stall"): read on
					// from the last message read, through a new
					// consumer (what the old one had sent and was not
					// read is sent again); the old one goes once the new
					// one is made, else it stays and the next check tries
					// again.
					cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartSequencePolicy, d.from(), nil
					nc, nit, err := d.consume(ctx, ds, cfg)
					if err != nil {
						if ctx.Err() != nil {
							return nil
						}
						d.error(fmt.Errorf("stream %s: the reader's consumer delivers nothing while the repository holds messages for it, and a new one could not be made (trying again): %w", s.url, err))
						continue
					}
					it.Stop()
					jsstall.Drop(ctx, s.js, s.subj.Stream(), cons)
					if nc == nil {
						return nil
					}
					cons, it, d.cons = nc, nit, nc
				}
				continue
			case errors.Is(err, jetstream.ErrMsgIteratorClosed), errors.Is(err, natsgo.ErrConnectionClosed):
				d.flushAll()
				return nil
			}
			if ctx.Err() != nil {
				return nil
			}
			d.error(fmt.Errorf("stream %s: %w", s.url, err))
			continue
		}
		d.handle(m)
	}
	d.flushAll()
	return nil
}

// from returns the first sequence the reader has yet to read: after the
// last message read, never before where the first consumer began.
func (d *dispatcher) from() uint64 { return max(d.lastSeq+1, d.startSeq) }

// pendingSeq returns the sequence of the first message the reader has
// yet to read that matches the consumer's filters (nil: everything), as
// the repository's leader has it (0: none, or the leader did not say).
// It is asked only after a wait for a message timed out, so a message
// the consumer sent is not on its way still: one it sent and was never
// read counts too.
func (d *dispatcher) pendingSeq(ctx context.Context, ds jetstream.Stream, filters []string) uint64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	from := d.from()
	info, err := ds.Info(ctx)
	if err != nil || info.State.LastSeq < from {
		return 0
	}
	if len(filters) == 0 {
		filters = []string{d.s.subj.AllRecords(), d.s.subj.AllTraces()}
	}
	var first uint64
	for _, f := range filters {
		if seq := jsstall.NextSeq(ctx, d.s.nc, d.s.subj.Stream(), f, from); seq != 0 && (first == 0 || seq < first) {
			first = seq
		}
	}
	return first
}

// readAll reports whether the subscriber has read every message of its
// subjects the repository holds now: the server has nothing pending for
// the consumer (NumPending counts its filter subjects' messages only) and
// the last message it delivered has been read.
//
// What was delivered is told by the consumer's own sequence, not the
// repository's: Delivered.Stream is where the consumer looks next, less
// one, and when a filtered consumer finds no more message of its
// subjects the server may move it on to the repository's last sequence,
// past the last message read (it does when the filter matches nothing:
// a window read with --host or --type that matched no record never
// ended).
func (d *dispatcher) readAll(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := d.cons.Info(ctx)
	if err != nil {
		return false // asked again at the next idle wait
	}
	switch {
	case info.NumPending > 0:
		return false
	case info.Delivered.Consumer == 0:
		return true // it delivered nothing (a consumer made again too)
	}
	return info.Name == d.lastCons && info.Delivered.Consumer <= d.lastDseq
}

// consume creates the ordered consumer and its iterator; with caughtUp
// and nothing pending it returns neither.
func (d *dispatcher) consume(ctx context.Context, ds jetstream.Stream, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, jetstream.MessagesContext, error) {
	cons, err := ds.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if d.s.caughtUp {
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, nil, err
		}
		if info.NumPending == 0 {
			jsstall.Drop(ctx, d.s.js, d.s.subj.Stream(), cons)
			return nil, nil, nil
		}
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return nil, nil, err
	}
	return cons, it, nil
}

// filters returns the consumer's subject filters: by type where every
// handler names a type the subscriber can name by subject, by host where
// hosts are set.
func (d *dispatcher) filters() []string {
	s := d.s
	var types []string
	all := len(s.typeHandlers) == 0 || s.typeHandlers[""] != nil
	if !all {
		for name := range s.typeHandlers {
			var full []string
			for _, w := range d.order {
				for _, te := range w.types {
					if (te.info.Name == name || shortName(te.info.Name) == name) && !slices.Contains(full, te.info.Name) {
						full = append(full, te.info.Name)
					}
				}
			}
			if len(full) == 0 && !strings.Contains(name, ".") {
				all = true // a short name the repository does not know yet
				break
			}
			if len(full) == 0 {
				full = []string{name}
			}
			for _, f := range full {
				if !slices.Contains(types, f) {
					types = append(types, f)
				}
			}
		}
	}
	if all {
		types = []string{""}
	}
	hosts := []string{""}
	if len(s.hosts) > 0 {
		hosts = hosts[:0]
		for h := range s.hosts {
			hosts = append(hosts, h)
		}
	}
	var out []string
	for _, h := range hosts {
		for _, t := range types {
			if h == "" && t == "" {
				out = append(out, s.subj.AllRecords())
				continue
			}
			out = append(out, s.subj.RecordsFilter(h, t))
		}
	}
	if len(s.traceHandlers) > 0 {
		for _, h := range hosts {
			if h == "" {
				out = append(out, s.subj.AllTraces())
			} else {
				out = append(out, s.subj.Traces(h))
			}
		}
	}
	if len(out) > maxFilterSubjects {
		out = []string{s.subj.AllRecords()}
		if len(s.traceHandlers) > 0 {
			out = append(out, s.subj.AllTraces())
		}
	}
	slices.Sort(out)
	return out
}

func shortName(n string) string { return n[strings.LastIndexByte(n, '.')+1:] }

// install makes md its writer's metadata and tells the metadata
// handlers.
func (d *dispatcher) install(md *Metadata) {
	if w := d.writers[md.Node]; w != nil && w.md != nil && md.Version <= w.md.Version {
		return
	}
	d.set(md)
	d.notify(md)
}

func (d *dispatcher) notify(md *Metadata) {
	d.s.inHandler.Store(true)
	for _, fn := range d.s.metaHandlers {
		fn(md)
	}
	d.s.inHandler.Store(false)
}

// set makes md its writer's metadata.
func (d *dispatcher) set(md *Metadata) {
	w := d.writer(md.Node)
	w.md = md
	seen := map[uint32]bool{}
	for _, ti := range md.Types {
		seen[ti.ID] = true
		if te := w.types[ti.ID]; te != nil && te.info.Name == ti.Name {
			te.info = ti
			continue
		}
		te := &typeEntry{info: ti}
		te.t, te.err = ti.Type(d.cat)
		te.handlers = append(te.handlers, d.s.typeHandlers[""]...)
		te.handlers = append(te.handlers, d.s.typeHandlers[ti.Name]...)
		if short := shortName(ti.Name); short != ti.Name {
			te.handlers = append(te.handlers, d.s.typeHandlers[short]...)
		}
		w.types[ti.ID] = te
	}
	for id := range w.types {
		if !seen[id] {
			delete(w.types, id)
		}
	}
}

// applyMeta installs the versions the metadata consumer queued.
func (d *dispatcher) applyMeta() {
	d.mu.Lock()
	p := d.pending
	d.pending = nil
	d.mu.Unlock()
	for _, md := range p {
		d.install(md)
	}
}

// version is the version of w's metadata (0 before the first).
func (w *writer) version() uint64 {
	if w.md == nil {
		return 0
	}
	return w.md.Version
}

// awaitMeta waits until version v of w's metadata is installed; false
// when it does not come.
func (w *writer) awaitMeta(d *dispatcher, v uint64) bool {
	deadline := time.Now().Add(metaWait)
	fetched := false
	for w.version() < v {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-d.note:
		case <-time.After(50 * time.Millisecond):
		}
		d.applyMeta()
		if w.version() < v && !fetched && time.Until(deadline) < metaWait/2 {
			fetched = true
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if md, _, err := d.s.lastMetadata(ctx, w.node); err == nil {
				d.install(md)
			}
			cancel()
		}
	}
	return true
}

func (d *dispatcher) error(err error) {
	if len(d.s.errHandlers) == 0 {
		return
	}
	for _, fn := range d.s.errHandlers {
		fn(err)
	}
}

func (d *dispatcher) hostWanted(h string) bool { return d.s.hosts == nil || d.s.hosts[h] }

func (d *dispatcher) handle(m jetstream.Msg) {
	meta, _ := m.Metadata()
	var seq, pending uint64
	if meta != nil {
		seq, pending = meta.Sequence.Stream, meta.NumPending
		d.lastSeq = seq
		d.lastCons, d.lastDseq = meta.Consumer, meta.Sequence.Consumer
	}
	d.stall.Read(time.Now())
	if strings.HasPrefix(m.Subject(), d.s.subj.AllTraces()[:len(d.s.subj.AllTraces())-1]) {
		d.trace(m, seq, meta)
		d.caughtUp(pending)
		return
	}
	if err := d.msg.Parse(m.Data()); err != nil {
		d.error(fmt.Errorf("message %d on %s: %w", seq, m.Subject(), err))
		d.caughtUp(pending)
		return
	}
	h := &d.msg.Header
	if !d.s.endTime.IsZero() && h.Time > d.s.endTime.UnixNano() {
		d.stop = true
		return
	}
	w := d.writer(nodeOf(m))
	if h.Meta > w.version() && !w.awaitMeta(d, h.Meta) {
		d.error(fmt.Errorf("message %d on %s: needs metadata version %d%s, the repository has %d", seq, m.Subject(), h.Meta, ofNode(w.node), w.version()))
		d.caughtUp(pending)
		return
	}
	te := w.types[h.TypeID()]
	host := h.Origin.Host
	if te == nil {
		d.error(fmt.Errorf("message %d on %s: type id %d is not in the metadata", seq, m.Subject(), h.TypeID()))
		d.caughtUp(pending)
		return
	}
	if len(te.handlers) == 0 || !d.hostWanted(host) {
		d.caughtUp(pending)
		return
	}
	d.gaps(w, h, te)
	cur := &w.cur
	if cur.active && (cur.run != h.Run || cur.ord != h.Ordinal) {
		d.flushBatch(w)
	}
	if !cur.active {
		cur.active, cur.run, cur.ord, cur.n = true, h.Run, h.Ordinal, 0
		cur.expected = 0
		for _, p := range h.Parts {
			if pe := w.types[p.TypeID]; pe != nil && len(pe.handlers) > 0 && d.hostWanted(p.Host) {
				cur.expected++
			}
		}
	}
	if te.err != nil {
		d.error(fmt.Errorf("message %d: %w", seq, te.err))
	} else {
		if cur.n == len(cur.parts) {
			cur.parts = append(cur.parts, partState{})
		}
		ps := &cur.parts[cur.n]
		ps.records.Reset()
		if err := d.msg.Records(te.t, &ps.records, &d.in); err != nil {
			d.error(fmt.Errorf("message %d on %s: %w", seq, m.Subject(), err))
		} else {
			keep := ps.pos
			ps.h = *h
			ps.h.Parts = nil // not needed past here; the slice is the message's
			ps.pos = append(keep[:0], h.Positions...)
			if h.Positions != nil {
				ps.h.Positions = ps.pos
			}
			ps.te, ps.seq = te, seq
			cur.n++
		}
	}
	if cur.n >= cur.expected {
		d.flushBatch(w)
	}
	d.caughtUp(pending)
}

// nodeOf is the cluster node that published m ("" none: a bridge that
// runs alone).
func nodeOf(m jetstream.Msg) string {
	h := m.Headers()
	if h == nil {
		return ""
	}
	if v := h[streammsg.NodeHeader]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// ofNode is " of node N" for messages, "" for a bridge that runs alone.
func ofNode(node string) string {
	if node == "" {
		return ""
	}
	return " of node " + node
}

// gaps reports records of h's subject that were skipped (the counts
// are w's).
func (d *dispatcher) gaps(w *writer, h *streammsg.Header, te *typeEntry) {
	if h.Run != w.gapRun {
		if w.gapRun != 0 && h.Run > w.gapRun {
			d.unclosed(w, w.gapRun, h.Run)
		}
		w.gapRun, w.lost = h.Run, h.Lost
		clear(w.next)
	}
	key := subjectKey{h.TypeID(), h.Origin.Host}
	if exp, ok := w.next[key]; ok && h.SubjectOrdinal > exp {
		g := Gap{Type: te.info.Name, Host: h.Origin.Host, Node: w.node, Records: h.SubjectOrdinal - exp}
		if h.Lost > w.lost {
			g.BridgeLost = h.Lost - w.lost
		}
		if len(d.s.gapHandlers) == 0 {
			d.error(&GapError{g})
		}
		for _, fn := range d.s.gapHandlers {
			fn(g)
		}
	}
	w.next[key] = h.SubjectOrdinal + uint64(h.Count)
	w.lost = h.Lost
}

// unclosed reports w's runs from, up to to, that ended without closing
// the stream (its metadata lists them).
func (d *dispatcher) unclosed(w *writer, from, to uint64) {
	for _, r := range w.md.Unclosed {
		if r < from || r >= to {
			continue
		}
		g := Gap{UnclosedRun: r, Node: w.node}
		if len(d.s.gapHandlers) == 0 {
			d.error(&GapError{g})
		}
		for _, fn := range d.s.gapHandlers {
			fn(g)
		}
	}
}

// flushBatch hands the records of w's current batch to the handlers, in
// the order the bridge received them.
func (d *dispatcher) flushBatch(w *writer) {
	c := &w.cur
	if !c.active {
		return
	}
	c.active = false
	c.entries = c.entries[:0]
	for pi := range c.parts[:c.n] {
		p := &c.parts[pi]
		for i := range p.records.Records {
			c.entries = append(c.entries, entry{pos: p.h.Position(i), part: pi, idx: i})
		}
	}
	if c.n > 1 {
		slices.SortFunc(c.entries, func(a, b entry) int { return int(a.pos) - int(b.pos) })
	}
	ev := &d.ev
	d.s.inHandler.Store(true)
	defer d.s.inHandler.Store(false)
	for _, e := range c.entries {
		p := &c.parts[e.part]
		*ev = Event{Record: p.records.Records[e.idx], Host: p.h.Origin.Host, Origin: p.h.Origin,
			Time: time.Unix(0, p.h.Time), Seq: p.seq, Run: p.h.Run, Ordinal: p.h.Ordinal + uint64(e.pos), Node: w.node}
		for _, fn := range p.te.handlers {
			fn(ev)
		}
	}
	for pi := range c.parts[:c.n] {
		c.parts[pi].records.Reset()
	}
	c.n = 0
	d.flushed = false
}

// caughtUp notes how many messages are still pending: with none, the
// subscriber has read everything (OnFlush; the end of a dump).
//
// A batch whose other parts are still being published waits for them
// (until the next batch, or idle).
func (d *dispatcher) caughtUp(pending uint64) {
	if pending > 0 {
		return
	}
	if d.endDue && d.readAll(context.Background()) {
		d.flushAll()
		d.flush()
		d.stop = true
		return
	}
	if d.s.caughtUp {
		d.flushAll()
		d.flush()
		d.stop = true
		return
	}
	if !d.active() {
		d.flush()
	}
}

func (d *dispatcher) flush() {
	if d.flushed {
		return
	}
	d.flushed = true
	for _, fn := range d.s.flushHandlers {
		fn()
	}
}

func (d *dispatcher) trace(m jetstream.Msg, seq uint64, meta *jetstream.MsgMetadata) {
	host, _ := streammsg.UnescapeToken(m.Subject()[strings.LastIndexByte(m.Subject(), '.')+1:])
	if !d.hostWanted(host) {
		return
	}
	t := &Trace{Host: host, Node: nodeOf(m), JSON: m.Data(), Seq: seq}
	if meta != nil {
		t.Time = meta.Timestamp
	}
	if !d.s.endTime.IsZero() && t.Time.After(d.s.endTime) {
		d.stop = true
		return
	}
	for _, fn := range d.s.traceHandlers {
		fn(t)
	}
	d.flushed = false
}
