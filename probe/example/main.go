// Example is a small program instrumented with package probe: a store that
// handles requests by searching a catalogue recursively, checking the
// inventory (which fails for every second request) and notifying a mailer
// on another goroutine, in a child trace.
//
//	go run ./probe/example -addr 127.0.0.1:10133 -requests 3 -depth 3
//
// It sends its traces to a tracebridge kieker-tcp receiver (by default the
// address TRACEBRIDGE_HOST/TRACEBRIDGE_PORT name, else 127.0.0.1:10133).
// On stdout it prints the calls it executed, one line per call in the order
// they began,
//
//	call TRACEID DEPTH CLASS OPERATION ok|failed [CAUSE]
//	fork CHILDTRACEID PARENTTRACEID
//
// and last what the probe did (probe: sent=… dropped=…). A bridge that is
// not there costs nothing but the records: the program runs the same,
// reports them dropped, and exits 0.
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
)

// Store handles requests.
type Store struct {
	depth     int
	catalog   Catalog
	inventory Inventory
	mailer    Mailer
	calls     *executed
}

// Handle serves one request in the trace ctx carries.
func (s *Store) Handle(ctx context.Context, req int) (err error) {
	t := probe.FromContext(ctx)
	defer t.EnterOp(opHandle).ExitErr(&err)
	defer s.calls.enter(t, opHandle, &err)()

	s.catalog.Search(ctx, s.depth)
	if err := s.inventory.Check(ctx, req); err != nil {
		return fmt.Errorf("request %d: %w", req, err)
	}
	child := t.Fork() // the mail goes out on another goroutine, in a child trace
	s.calls.fork(child, t)
	var wg sync.WaitGroup
	wg.Go(func() {
		s.mailer.Notify(probe.WithTrace(ctx, child), req)
	})
	wg.Wait()
	return nil
}

// Catalog is searched recursively: every level searches two sub-levels.
type Catalog struct{ calls *executed }

// Search returns the number of entries it visited.
func (c *Catalog) Search(ctx context.Context, depth int) int {
	t := probe.FromContext(ctx)
	defer t.EnterOp(opSearch).Exit()
	defer c.calls.enter(t, opSearch, nil)()
	n := 1
	if depth > 1 {
		n += c.Search(ctx, depth-1)
		n += c.Search(ctx, depth-1)
	}
	return n
}

// Inventory fails for even requests.
type Inventory struct{ calls *executed }

// errOutOfStock is what Check reports.
var errOutOfStock = errors.New("out of stock")

// Check reports whether the item of the request is in stock.
func (v *Inventory) Check(ctx context.Context, req int) (err error) {
	t := probe.FromContext(ctx)
	defer t.EnterOp(opCheck).ExitErr(&err)
	defer v.calls.enter(t, opCheck, &err)()
	if req%2 == 0 {
		return fmt.Errorf("item %d: %w", req, errOutOfStock)
	}
	return nil
}

// Mailer sends notifications.
type Mailer struct{ calls *executed }

// Notify pretends to send a mail.
func (m *Mailer) Notify(ctx context.Context, req int) {
	t := probe.FromContext(ctx)
	defer t.EnterOp(opNotify).Exit()
	defer m.calls.enter(t, opNotify, nil)()
	time.Sleep(time.Millisecond)
}

// executed records the calls as they happen, for the output the
// end-to-end test compares with the bridge's log.
type executed struct {
	mu    sync.Mutex
	lines []string
	depth map[int64]int
}

// enter records the start of a call in trace t; the function it returns
// records the end, with *errp as outcome when errp is not nil.
func (e *executed) enter(t *probe.Trace, op probe.Op, errp *error) func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := len(e.lines)
	d := e.depth[t.ID()]
	e.depth[t.ID()] = d + 1
	e.lines = append(e.lines, fmt.Sprintf("call %d %d %s %s", t.ID(), d, op.Class(), op.Operation()))
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.depth[t.ID()]--
		if errp != nil && *errp != nil {
			e.lines[i] += " failed " + (*errp).Error()
		} else {
			e.lines[i] += " ok"
		}
	}
}

func (e *executed) fork(child, parent *probe.Trace) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines = append(e.lines, fmt.Sprintf("fork %d %d", child.ID(), parent.ID()))
}

func main() {
	addr := flag.String("addr", "", "bridge address host:port (default: TRACEBRIDGE_HOST:TRACEBRIDGE_PORT, else 127.0.0.1:10133)")
	requests := flag.Int("requests", 3, "requests to handle, one trace each")
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

	calls := &executed{depth: map[int64]int{}}
	store := &Store{depth: *depth, catalog: Catalog{calls}, inventory: Inventory{calls}, mailer: Mailer{calls}, calls: calls}
	for req := 1; req <= *requests; req++ {
		t := w.StartTrace()
		if err := store.Handle(probe.WithTrace(context.Background(), t), req); err != nil {
			fmt.Fprintln(os.Stderr, "example:", err)
		}
	}

	closeErr := w.Close() // sends what is buffered, waiting at most Config.CloseTimeout
	st := w.Stats()
	fmt.Println(strings.Join(calls.lines, "\n"))
	fmt.Printf("probe: sent=%d dropped=%d rejected=%d lost=%d connects=%d\n", st.Sent, st.Dropped, st.Rejected, st.Lost, st.Connects)
	if closeErr != nil {
		fmt.Fprintln(os.Stderr, "example:", closeErr)
	}
}
