// Example is a small program instrumented with package probe: a store
// whose requests search the shelves of a catalogue in parallel (one
// goroutine per shelf, each searching recursively), check the inventory
// (which fails for every second request) and notify a mailer on another
// goroutine, which audits the mail on yet another. Every goroutine is
// started with probe.Go, so each request is ONE trace across goroutines:
// the parent records a SplitEvent where it starts a goroutine (and a
// JoinEvent where it has waited for it), and the goroutine's calls form a
// child trace whose TraceMetadata names that split point.
//
//	go run ./probe/example -addr 127.0.0.1:10133 -requests 3 -shelves 2 -depth 3
//
// It sends its traces to a tracebridge kieker-tcp receiver (by default the
// address TRACEBRIDGE_HOST/TRACEBRIDGE_PORT name, else 127.0.0.1:10133).
// On stdout it prints its own account of what it executed (kept apart from
// the probe, in its own context values), tab-separated, one line per call
// in the order the calls began:
//
//	request REQ ROOTTRACEID
//	call    REQ TRACEID DEPTH CLASS OPERATION OUTCOME PATH
//	fork    CHILDTRACEID PARENTTRACEID
//
// where DEPTH is the call's depth in its goroutine's trace, OUTCOME "ok" or
// "failed CAUSE", and PATH the operations from the request's first call
// down to this one, across goroutines, joined by " | "; and last what the
// probe did (probe: sent=… dropped=…). A bridge that is not there costs
// nothing but the records: the program runs the same, reports them
// dropped, and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/probe"
)

// The instrumented operations, registered once.
var (
	opHandle = probe.NewOp("func (*main.Store) Handle(context.Context, int) error", "main.Store")
	opSearch = probe.NewOp("func (*main.Catalog) Search(context.Context, int) int", "main.Catalog")
	opCheck  = probe.NewOp("func (*main.Inventory) Check(context.Context, int) error", "main.Inventory")
	opNotify = probe.NewOp("func (*main.Mailer) Notify(context.Context, int)", "main.Mailer")
	opAudit  = probe.NewOp("func (*main.Auditor) Record(context.Context, int)", "main.Auditor")
)

// Store handles requests.
type Store struct {
	shelves, depth int
	catalog        Catalog
	inventory      Inventory
	mailer         Mailer
	acct           *account
}

// Handle serves one request in the trace ctx carries.
func (s *Store) Handle(ctx context.Context, req int) (err error) {
	t := probe.FromContext(ctx)
	defer t.EnterOp(opHandle).ExitErr(&err)
	ctx, done := s.acct.enter(ctx, opHandle)
	defer func() { done(err) }()

	// One goroutine per shelf, each in a child trace split off here.
	var wg sync.WaitGroup
	children := make([]int64, s.shelves)
	for i := range children {
		wg.Add(1)
		children[i] = probe.Go(ctx, func(ctx context.Context) {
			defer wg.Done()
			s.catalog.Search(ctx, s.depth)
		})
		s.acct.fork(children[i], t)
	}
	wg.Wait()
	for _, id := range children {
		t.Join(id)
	}
	if err := s.inventory.Check(ctx, req); err != nil {
		return fmt.Errorf("request %d: %w", req, err)
	}
	// The mail goes out on another goroutine, the caller waits for it.
	wg.Add(1)
	id := probe.Go(ctx, func(ctx context.Context) {
		defer wg.Done()
		s.mailer.Notify(ctx, req)
	})
	s.acct.fork(id, t)
	wg.Wait()
	t.Join(id)
	return nil
}

// Catalog is searched recursively: every level searches two sub-levels.
type Catalog struct{ acct *account }

// Search returns the number of entries it visited.
func (c *Catalog) Search(ctx context.Context, depth int) int {
	defer probe.FromContext(ctx).EnterOp(opSearch).Exit()
	ctx, done := c.acct.enter(ctx, opSearch)
	defer done(nil)
	n := 1
	if depth > 1 {
		n += c.Search(ctx, depth-1)
		n += c.Search(ctx, depth-1)
	}
	return n
}

// Inventory fails for even requests.
type Inventory struct{ acct *account }

// errOutOfStock is what Check reports.
var errOutOfStock = errors.New("out of stock")

// Check reports whether the item of the request is in stock.
func (v *Inventory) Check(ctx context.Context, req int) (err error) {
	defer probe.FromContext(ctx).EnterOp(opCheck).ExitErr(&err)
	_, done := v.acct.enter(ctx, opCheck)
	defer func() { done(err) }()
	if req%2 == 0 {
		return fmt.Errorf("item %d: %w", req, errOutOfStock)
	}
	return nil
}

// Mailer sends notifications.
type Mailer struct {
	auditor Auditor
	acct    *account
}

// Notify pretends to send a mail, and has it audited on a goroutine of
// its own (a child trace of the mailer's, itself a child of the request's).
func (m *Mailer) Notify(ctx context.Context, req int) {
	t := probe.FromContext(ctx)
	defer t.EnterOp(opNotify).Exit()
	ctx, done := m.acct.enter(ctx, opNotify)
	defer done(nil)
	audited := make(chan struct{})
	id := probe.Go(ctx, func(ctx context.Context) {
		defer close(audited)
		m.auditor.Record(ctx, req)
	})
	m.acct.fork(id, t)
	time.Sleep(time.Millisecond)
	<-audited
	t.Join(id)
}

// Auditor keeps a record of the mails.
type Auditor struct{ acct *account }

// Record pretends to write the audit record.
func (a *Auditor) Record(ctx context.Context, req int) {
	defer probe.FromContext(ctx).EnterOp(opAudit).Exit()
	_, done := a.acct.enter(ctx, opAudit)
	defer done(nil)
	time.Sleep(100 * time.Microsecond)
}

// account is the example's own record of the calls it made, for the
// output the end-to-end test compares with the bridge's log. It knows the
// nesting of calls across goroutines from its own context value, not from
// the probe.
type account struct {
	mu    sync.Mutex
	lines []string
}

// frame is a call open in a context: its operation, the trace it was
// recorded in, and the frame it was called from.
type frame struct {
	req    int
	op     probe.Op
	trace  int64
	parent *frame
}

type frameKey struct{}

// enter records the start of a call of op in the trace ctx carries and
// returns the context for the calls it makes; done records its end with
// the error it returned (nil: ok).
func (a *account) enter(ctx context.Context, op probe.Op) (_ context.Context, done func(error)) {
	parent, _ := ctx.Value(frameKey{}).(*frame)
	f := &frame{op: op, trace: probe.FromContext(ctx).ID(), parent: parent}
	if parent != nil {
		f.req = parent.req
	} else {
		f.req, _ = ctx.Value(reqKey{}).(int)
	}
	depth := 0 // in this goroutine's trace: the frames above in the same trace
	var path []string
	for p := f; p != nil; p = p.parent {
		if p != f && p.trace == f.trace {
			depth++
		}
		path = append(path, p.op.Operation())
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	a.mu.Lock()
	i := len(a.lines)
	a.lines = append(a.lines, "")
	a.mu.Unlock()
	return context.WithValue(ctx, frameKey{}, f), func(err error) {
		outcome := "ok"
		if err != nil {
			outcome = "failed " + err.Error()
		}
		line := strings.Join([]string{"call", fmt.Sprint(f.req), fmt.Sprint(f.trace), fmt.Sprint(depth),
			op.Class(), op.Operation(), outcome, strings.Join(path, " | ")}, "\t")
		a.mu.Lock()
		a.lines[i] = line
		a.mu.Unlock()
	}
}

type reqKey struct{}

func (a *account) fork(child int64, parent *probe.Trace) {
	if child == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lines = append(a.lines, fmt.Sprintf("fork\t%d\t%d", child, parent.ID()))
}

func (a *account) request(req int, t *probe.Trace) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lines = append(a.lines, fmt.Sprintf("request\t%d\t%d", req, t.ID()))
}

func main() {
	addr := flag.String("addr", "", "bridge address host:port (default: TRACEBRIDGE_HOST:TRACEBRIDGE_PORT, else 127.0.0.1:10133)")
	requests := flag.Int("requests", 3, "requests to handle, one trace each")
	shelves := flag.Int("shelves", 2, "shelves searched in parallel per request, one goroutine each")
	depth := flag.Int("depth", 3, "recursion depth of the catalogue search")
	flag.Parse()

	cfg, err := probe.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "example:", err, "(using the default)")
	}
	if *addr != "" {
		cfg.Addr = *addr
	}
	w, err := probe.NewWriter(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(2)
	}

	acct := &account{}
	store := &Store{
		shelves: *shelves, depth: *depth,
		catalog: Catalog{acct}, inventory: Inventory{acct}, mailer: Mailer{Auditor{acct}, acct},
		acct: acct,
	}
	for req := 1; req <= *requests; req++ {
		t := w.StartTrace()
		acct.request(req, t)
		ctx := context.WithValue(probe.WithTrace(context.Background(), t), reqKey{}, req)
		if err := store.Handle(ctx, req); err != nil {
			fmt.Fprintln(os.Stderr, "example:", err)
		}
	}

	closeErr := w.Close() // sends what is buffered, waiting at most Config.CloseTimeout
	st := w.Stats()
	fmt.Println(strings.Join(acct.lines, "\n"))
	fmt.Printf("probe: sent=%d dropped=%d rejected=%d lost=%d connects=%d\n", st.Sent, st.Dropped, st.Rejected, st.Lost, st.Connects)
	if closeErr != nil {
		fmt.Fprintln(os.Stderr, "example:", closeErr)
	}
}
