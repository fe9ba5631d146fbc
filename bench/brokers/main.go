// Brokers is tracebridge's broker benchmark. It is run by hand
// (go run ./bench/brokers), never by CI; README.md explains the numbers.
//
// In one run it measures records per second through the bridge over three
// transports, each with its own tracebridge serve process and a binary
// Kieker log sink:
//
//   - kdb-tcp: P connections to a tcp-server receiver send KDB binary (the
//     baseline every ratio is taken against);
//   - stomp: P publishers send KDB text messages of R records each to a
//     fresh RabbitMQ queue that a stomp-client receiver consumes;
//   - embedded: P publishers publish the same messages with core NATS to
//     the bridge's embedded broker (broker-embedded), whose JetStream
//     stream the bridge consumes; embedded-js publishes them through
//     JetStream, waiting for every acknowledgement.
//
// The clock runs from the first send until tracebridge_sink_records_total
// reaches the number of records sent. The log is then read back and every
// record checked; brokers deliver at least once, so distinct records and
// duplicates are counted. For each broker the same publishers are also
// timed alone, with no bridge consuming (publish-only), to tell whether the
// broker or the bridge is the limit.
//
// Concurrency: one goroutine per publisher; everything else runs on the
// main goroutine. The bridge and, for the embedded broker's publish-only
// run, the broker are separate processes that this program starts and
// stops.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/record"
)

// The paths a run can measure.
const (
	pathTCP        = "kdb-tcp"
	pathSTOMP      = "stomp"
	pathEmbedded   = "embedded"
	pathEmbeddedJS = "embedded-js"
)

var allPaths = []string{pathTCP, pathSTOMP, pathEmbedded, pathEmbeddedJS}

const (
	mib          = 1 << 20
	maxRecords   = 50_000_000
	maxPerMsg    = 100_000
	maxPublisher = 256
)

type options struct {
	records       int64
	baseline      int64
	perMsg        int
	publishers    int
	paths         []string
	bin           string
	keep          bool
	stompURL      string
	stompUser     string
	stompPassword string
	vhost         string
}

func main() {
	if code, ok := benchkit.Child(roleEnv, roleEmbedded, "embedded broker", embeddedBroker); ok {
		os.Exit(code)
	}
	os.Exit(benchkit.Main(os.Args[1:], parseFlags, run))
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := benchkit.NewFlags("brokers", "usage: go run ./bench/brokers [-records N] [-per-message R] [-publishers P] [-paths LIST] [-bin PATH] [-keep]", stderr)
	var o options
	var paths string
	fs.Int64Var(&o.records, "records", 100_000, "records sent in total over each path")
	fs.Int64Var(&o.baseline, "baseline-records", 1_000_000, "records the kdb-tcp baseline sends at least (it is fast: fewer would be timed too coarsely)")
	fs.IntVar(&o.perMsg, "per-message", 1, "records per broker message (KDB text lines); the TCP baseline has no messages")
	fs.IntVar(&o.publishers, "publishers", 2, "concurrent publishers (TCP connections for kdb-tcp)")
	fs.StringVar(&paths, "paths", strings.Join(allPaths, ","), "comma-separated paths to measure: "+strings.Join(allPaths, ", "))
	fs.StringVar(&o.bin, "bin", "", "tracebridge binary (default: go build ./cmd/tracebridge into a temporary directory)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory with the configurations and Kieker logs")
	fs.StringVar(&o.stompURL, "stomp", "stomp://127.0.0.1:61613", "STOMP broker (RabbitMQ with rabbitmq_stomp)")
	fs.StringVar(&o.stompUser, "stomp-user", "guest", "STOMP login")
	fs.StringVar(&o.stompPassword, "stomp-password", "guest", "STOMP passcode")
	fs.StringVar(&o.vhost, "vhost", "/", "STOMP host header (RabbitMQ virtual host)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.publishers < 1 || o.publishers > maxPublisher {
		fs.Bad("-publishers %d: want 1 to %d", o.publishers, maxPublisher)
	}
	if o.records < int64(max(o.publishers, 1)) || o.records > maxRecords {
		fs.Bad("-records %d: want one per publisher at least, %d at most", o.records, maxRecords)
	}
	if o.baseline < 0 || o.baseline > maxRecords {
		fs.Bad("-baseline-records %d: want 0 to %d", o.baseline, maxRecords)
	}
	if o.perMsg < 1 || o.perMsg > maxPerMsg {
		fs.Bad("-per-message %d: want 1 to %d", o.perMsg, maxPerMsg)
	}
	for _, p := range fs.List("paths", paths, func(p string) string {
		if !slices.Contains(allPaths, p) {
			return fmt.Sprintf("-paths: unknown path %q (want %s)", p, strings.Join(allPaths, ", "))
		}
		return ""
	}) {
		if !slices.Contains(o.paths, p) {
			o.paths = append(o.paths, p)
		}
	}
	if err := fs.Err(); err != nil {
		return nil, err
	}
	return &o, nil
}

// result is one path's measurement.
type result struct {
	path               string
	records, messages  int64
	elapsed            time.Duration // first send to the last record in the sink
	sent               time.Duration // first send to the publishers' end
	pause              time.Duration // the longest time the sink count did not move
	cpu                time.Duration // the bridge's CPU time over its life
	peak, rssMax       int64         // VmHWM before SIGTERM, largest VmRSS sampled
	peakKnown, measure bool          // peak read; the bridge run finished
	tally              tally
	verified           bool
	pubCPU             time.Duration // this program's CPU time (the publishers) during the bridge run
	pubOnly            time.Duration // publish-only: first send until the broker has every message
	pubDone            bool
	err, pubErr        error
}

// rate is the bridge run's records per second.
func (r *result) rate() float64 { return float64(r.records) / r.elapsed.Seconds() }

// run runs the benchmark and returns the exit code.
func run(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	logf := benchkit.Logf(stderr, "brokers")
	tmp, bin, done, err := benchkit.Setup(ctx, "tracebridge-brokers-", o.bin, o.keep, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer done()
	bridgeGo := benchkit.GoVersion(bin)
	stompServer := "not used"
	if slices.Contains(o.paths, pathSTOMP) {
		if stompServer, err = stompServerName(o); err != nil {
			logf("%v", err)
			return 1
		}
	}

	cat := record.Builtin()
	sigs := benchkit.Signatures()
	var tcpLoads, brokerLoads []*load
	var messages int64
	tcpRecords := max(o.records, o.baseline)
	if slices.Contains(o.paths, pathTCP) {
		if tcpLoads, err = newLoads(tcpRecords, o.publishers, 0, cat, sigs); err != nil {
			logf("%v", err)
			return 1
		}
	}
	if len(o.paths) > 1 || o.paths[0] != pathTCP {
		if brokerLoads, err = newLoads(o.records, o.publishers, o.perMsg, cat, sigs); err != nil {
			logf("%v", err)
			return 1
		}
		for _, l := range brokerLoads {
			messages += int64(l.messages())
		}
	}

	var results []result
	for _, path := range o.paths {
		if ctx.Err() != nil {
			break
		}
		r := result{path: path, records: o.records, messages: messages}
		loads := brokerLoads
		if path == pathTCP {
			r.records, r.messages, loads = tcpRecords, 0, tcpLoads
		}
		dir := filepath.Join(tmp, path)
		if err := os.Mkdir(dir, 0o755); err != nil {
			logf("%v", err)
			return 1
		}
		logf("%s: bridge run, %d records from %d publisher(s)", path, r.records, o.publishers)
		r.err = bridgeRun(ctx, o, bin, path, dir, loads, sigs, &r, logf)
		if r.err != nil {
			logf("%s: %v", path, r.err)
		}
		benchkit.SettleDisk()
		if path != pathTCP && ctx.Err() == nil {
			logf("%s: publish-only run", path)
			r.pubErr = publishOnly(ctx, o, path, dir, loads, messages, &r, logf)
			if r.pubErr != nil {
				logf("%s: publish-only: %v", path, r.pubErr)
			}
			benchkit.SettleDisk()
		}
		results = append(results, r)
	}

	baseline := "no kdb-tcp baseline"
	if tcpLoads != nil {
		baseline = fmt.Sprintf("kdb-tcp baseline: %d records (KDB binary)", tcpRecords)
	}
	fmt.Fprintf(stdout, "tracebridge broker benchmark: %d records from %d publisher(s), %d record(s) per broker message (KDB text); %s\n",
		o.records, o.publishers, o.perMsg, baseline)
	fmt.Fprintf(stdout, "bench %s, bridge %s (%s), GOMAXPROCS %d, %d CPUs, %s/%s; STOMP broker %s\n",
		runtime.Version(), bridgeGo, bin, runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, stompServer)
	printTable(stdout, o.perMsg, results)
	code := 0
	for _, r := range results {
		if r.err != nil || r.pubErr != nil {
			code = 1
		}
	}
	if ctx.Err() != nil {
		code = 1
	}
	return code
}

// newLoads generates and encodes the loads of all publishers (see newLoad).
func newLoads(records int64, publishers, perMsg int, cat *record.Catalog, sigs []benchkit.Signature) ([]*load, error) {
	loads := make([]*load, publishers)
	for p, n := range split(records, publishers) {
		var err error
		if loads[p], err = newLoad(p, n, perMsg, cat, sigs); err != nil {
			return nil, err
		}
	}
	return loads, nil
}

// bridgeRun starts the bridge for path, sends every load through it, stops
// the clock when the sink has consumed as many records as were sent, stops
// the bridge and verifies its log.
func bridgeRun(ctx context.Context, o *options, bin, path, dir string, loads []*load, sigs []benchkit.Signature,
	r *result, logf func(string, ...any)) error {
	queue := ""
	if path == pathSTOMP {
		queue = queueName("bridge")
		defer deleteQueue(queue, o.vhost, logf)
	}
	b, err := benchkit.Start(ctx, bin, dir, receiverConfig(path, o, queue))
	if err != nil {
		return err
	}
	defer b.Kill()
	if path != pathTCP {
		if err := waitConnected(b); err != nil {
			return err
		}
	}
	if n, err := b.SinkRecords(); err != nil || n != 0 {
		return fmt.Errorf("sink count before the run: %d (%v)", n, err)
	}
	ss, err := dialSenders(path, o, b.Addr, queue, dir, len(loads))
	if err != nil {
		return err
	}
	pid := b.Pid()
	cpu0 := benchkit.SelfCPU()
	start := time.Now()
	runErr := drive(ctx, b, sendAll(ss, loads), start, r)
	r.pubCPU = benchkit.SelfCPU() - cpu0
	if runErr != nil && !errors.Is(runErr, errStalled) {
		return runErr
	}
	if _, peak, err := benchkit.Memory(pid); err == nil {
		r.peak, r.peakKnown = peak, true
	}
	if r.cpu, err = b.Stop(); err != nil {
		return errors.Join(runErr, err)
	}
	r.measure = runErr == nil
	if runErr == nil {
		logf("%s: %d records in %.2f s; verifying the log", path, r.records, r.elapsed.Seconds())
	} else {
		logf("%s: stalled; counting what the log holds", path)
	}
	r.tally, err = verifyLog(ctx, b.LogDir, loads, sigs)
	r.verified = err == nil && runErr == nil
	if err := errors.Join(runErr, err); err != nil {
		return err
	}
	if !o.keep {
		return os.RemoveAll(filepath.Join(dir, "log"))
	}
	return nil
}

// drive polls the bridge's sink count from start, at the
// benchkit.PollStep of the time elapsed, until it reaches the records sent
// and the publishers are done, and fills in r's times and sampled RSS. A
// count that stops moving for stallTimeout ends it with errStalled.
func drive(ctx context.Context, b *benchkit.Bridge, done <-chan sendResult, start time.Time, r *result) error {
	pid := b.Pid()
	timer := time.NewTimer(benchkit.PollStep(0))
	defer timer.Stop()
	last, lastChange := int64(-1), start
	for r.elapsed == 0 || done != nil {
		select {
		case sr := <-done:
			done = nil
			if sr.err != nil {
				return sr.err
			}
			r.sent = sr.end.Sub(start)
			continue
		case <-timer.C:
		case <-b.Exited():
			return fmt.Errorf("tracebridge serve exited during the run (%v): %s", b.WaitErr(), b.Stderr())
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.elapsed > 0 { // waiting for the publishers only
			timer.Reset(benchkit.PollStep(time.Since(start)))
			continue
		}
		if rss, _, err := benchkit.Memory(pid); err == nil {
			r.rssMax = max(r.rssMax, rss)
		}
		n, err := b.SinkRecords()
		if err != nil {
			return err
		}
		now := time.Now()
		timer.Reset(benchkit.PollStep(now.Sub(start)))
		if n != last {
			r.pause = max(r.pause, now.Sub(lastChange))
			last, lastChange = n, now
		}
		if n >= r.records {
			r.elapsed = now.Sub(start)
			continue
		}
		if now.Sub(lastChange) > stallTimeout {
			return fmt.Errorf("%w: the sink consumed %d of %d records, then nothing for %v", errStalled, n, r.records, stallTimeout)
		}
	}
	return nil
}

// publishOnly times the publishers alone: to a fresh RabbitMQ queue nobody
// consumes (until the last SEND's receipt), or to the embedded broker run
// without the bridge (until its stream holds every message, or for
// embedded-js until every publish is acknowledged).
func publishOnly(ctx context.Context, o *options, path, dir string, loads []*load, messages int64,
	r *result, logf func(string, ...any)) error {
	var ss []sender
	var js jetstream.JetStream
	var err error
	switch path {
	case pathSTOMP:
		queue := queueName("publish")
		defer deleteQueue(queue, o.vhost, logf)
		if ss, err = dialSenders(path, o, "", queue, "", len(loads)); err != nil {
			return err
		}
	default:
		p, err := startBroker(ctx, filepath.Join(dir, "publish-only-broker"))
		if err != nil {
			return err
		}
		defer p.stop()
		nc, err := natsgo.Connect("nats://"+p.addr, natsgo.Name("tracebridge bench monitor"))
		if err != nil {
			return err
		}
		defer nc.Close()
		if js, err = jetstream.New(nc); err != nil {
			return err
		}
		if ss, err = dialSenders(path, o, p.addr, "", "", len(loads)); err != nil {
			return err
		}
	}
	start := time.Now()
	sr := <-sendAll(ss, loads)
	if sr.err != nil {
		return sr.err
	}
	r.pubOnly = sr.end.Sub(start)
	if js != nil {
		last, lastChange := uint64(0), time.Now()
		for {
			n, err := streamMessages(ctx, js)
			if err != nil {
				return err
			}
			now := time.Now()
			if n >= uint64(messages) {
				if path == pathEmbedded {
					r.pubOnly = now.Sub(start)
				}
				break
			}
			if n != last {
				last, lastChange = n, now
			}
			if now.Sub(lastChange) > storeStallTimeout {
				return fmt.Errorf("%w: the stream holds %d of the %d messages published (%d lost), then nothing for %v",
					errStalled, n, messages, uint64(messages)-n, storeStallTimeout)
			}
			time.Sleep(benchkit.PollStep(now.Sub(start)))
		}
	}
	r.pubDone = true
	return nil
}

// queueName returns a RabbitMQ queue destination no other run uses.
func queueName(kind string) string {
	return fmt.Sprintf("/queue/tracebridge.bench.%d.%d.%s", os.Getpid(), time.Now().UnixNano(), kind)
}

// deleteQueue deletes the RabbitMQ queue a /queue/ destination created
// (best effort, with rabbitmqctl), so runs do not pile up queues.
func deleteQueue(dest, vhost string, logf func(string, ...any)) {
	name := strings.TrimPrefix(dest, "/queue/")
	ctl, err := exec.LookPath("rabbitmqctl")
	if err != nil {
		logf("no rabbitmqctl: delete RabbitMQ queue %s by hand", name)
		return
	}
	if out, err := exec.Command(ctl, "-q", "-p", vhost, "delete_queue", name).CombinedOutput(); err != nil {
		logf("rabbitmqctl delete_queue %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
}

// stompServerName connects once to the STOMP broker and returns what its
// CONNECTED frame calls itself.
func stompServerName(o *options) (string, error) {
	s, err := dialSTOMP(o, "")
	if err != nil {
		return "", fmt.Errorf("STOMP broker %s: %w (start RabbitMQ with rabbitmq_stomp, or leave out -paths stomp)", o.stompURL, err)
	}
	defer s.close()
	if name := s.c.Server(); name != "" {
		return name, nil
	}
	return "(unnamed)", nil
}

// printTable prints one row per path.
func printTable(w io.Writer, perMsg int, results []result) {
	var base float64 // the kdb-tcp baseline's records/s
	for _, r := range results {
		if r.path == pathTCP && r.verified {
			base = r.rate()
		}
	}
	tw := benchkit.Table(w)
	fmt.Fprintln(tw, "path\trec/msg\trecords\tmessages\tseconds\trecords/s\tratio\tsend s\tpub-only s\tpub-only rec/s\tpub-only msg/s\tmax pause s\tdistinct\tduplicates\tmissing\tpeak RSS MiB\tbridge CPU s\tbench CPU s\t")
	for _, r := range results {
		rpm := "-"
		msgs := "-"
		if r.path != pathTCP {
			rpm = fmt.Sprint(perMsg)
			msgs = fmt.Sprint(r.messages)
		}
		secs, rate, ratio, sent := "-", "-", "-", "-"
		if r.elapsed > 0 {
			secs = fmt.Sprintf("%.3f", r.elapsed.Seconds())
			rate = fmt.Sprintf("%.0f", r.rate())
			if base > 0 {
				ratio = fmt.Sprintf("%.3f", r.rate()/base)
			}
		}
		if r.sent > 0 {
			sent = fmt.Sprintf("%.3f", r.sent.Seconds())
		}
		pubS, pubRate, pubMsgs := "-", "-", "-"
		if r.pubDone {
			pubS = fmt.Sprintf("%.3f", r.pubOnly.Seconds())
			pubRate = fmt.Sprintf("%.0f", float64(r.records)/r.pubOnly.Seconds())
			pubMsgs = fmt.Sprintf("%.0f", float64(r.messages)/r.pubOnly.Seconds())
		}
		distinct, dups, missing := "-", "-", "-"
		if r.tally.records > 0 || r.verified {
			distinct, dups, missing = fmt.Sprint(r.tally.distinct), fmt.Sprint(r.tally.duplicates), fmt.Sprint(r.tally.missing)
		}
		peak, cpu, pubCPU, pause := "-", "-", "-", "-"
		if r.peakKnown {
			peak = fmt.Sprintf("%.1f", float64(r.peak)/mib)
		}
		if r.measure {
			cpu = fmt.Sprintf("%.2f", r.cpu.Seconds())
			pubCPU = fmt.Sprintf("%.2f", r.pubCPU.Seconds())
			pause = fmt.Sprintf("%.3f", r.pause.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.path, rpm, r.records, msgs, secs, rate, ratio, sent, pubS, pubRate, pubMsgs, pause, distinct, dups, missing, peak, cpu, pubCPU)
	}
	tw.Flush()
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(w, "%s: FAILED: %v\n", r.path, r.err)
		}
		if r.pubErr != nil {
			fmt.Fprintf(w, "%s: publish-only FAILED: %v\n", r.path, r.pubErr)
		}
	}
	if base == 0 {
		fmt.Fprintln(w, "no verified kdb-tcp run: no ratios")
	}
}

// errStalled reports a run whose count stopped short of what was sent.
var errStalled = errors.New("the count stopped short of what was sent")
