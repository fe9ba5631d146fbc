package api

import (
	"net/http"

	"github.com/tracebridge/tracebridge/internal/flame"
)

// auth says who may call a route.
type auth uint8

const (
	// authNone: anyone (health).
	authNone auth = iota
	// authRead: anyone on loopback (unless ReadTokenRequired), a token
	// holder from elsewhere.
	authRead
	// authSecret: a token holder, also for reading (the configuration
	// holds broker passwords).
	authSecret
	// authWrite: a token holder, from the API's own origin.
	authWrite
)

var authNames = [...]string{"none", "read", "token", "token"}

// Where a parameter is.
const (
	inQuery = "query"
	inPath  = "path"
)

// param declares a parameter of a route.
type param struct {
	name, in string
	// typ is the OpenAPI type: string, integer, boolean, number.
	typ string
	// format refines it for people: duration, time, trace-id, regex, eql.
	format   string
	desc     string
	required bool
	repeat   bool
	enum     []string
	def      string
}

// route is one endpoint: the table below registers it, checks its
// parameters and describes it in the OpenAPI document.
type route struct {
	method, path string
	summary      string
	tag          string
	auth         auth
	params       []param
	// body names the schema of the request body (JSON), resp the
	// schema of the answer (or a media type such as text/plain).
	body, resp string
	// jaeger: Jaeger's envelope for errors, unknown parameters ignored.
	jaeger bool
	h      func(*call) error
	// mount serves the route with a handler of its own (h is nil).
	mount func(*API) http.Handler
}

func (rt *route) pattern() string {
	if rt.method == "" {
		return rt.path
	}
	return rt.method + " " + rt.path
}

func (rt *route) param(name string) *param {
	for i := range rt.params {
		if rt.params[i].name == name {
			return &rt.params[i]
		}
	}
	return nil
}

func (rt *route) serve(a *API, w http.ResponseWriter, r *http.Request) {
	rt.mount(a).ServeHTTP(w, r)
}

func q(name, typ, desc string) param { return param{name: name, in: inQuery, typ: typ, desc: desc} }

func pathParam(name, desc string) param {
	return param{name: name, in: inPath, typ: "string", desc: desc, required: true}
}

func (p param) fmt(f string) param       { p.format = f; return p }
func (p param) req() param               { p.required = true; return p }
func (p param) many() param              { p.repeat = true; return p }
func (p param) dflt(d string) param      { p.def = d; return p }
func (p param) oneOf(vs ...string) param { p.enum = vs; return p }

// join concatenates parameter lists into a new one.
func join(lists ...[]param) []param {
	var out []param
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// The parameters of the store's filters (docs/QUERY.md), shared by the
// search, pivot and analyses.
var filterParams = []param{
	q("host", "string", "traces with a span on this host; repeat for any of several").many(),
	q("since", "string", "traces that started at or after: RFC 3339 or a duration before now (15m, 2h, 7d)").fmt("time"),
	q("until", "string", "traces that started at or before: RFC 3339 or a duration before now").fmt("time"),
	q("minDuration", "string", "traces lasting at least this long (250ms, 1.5s)").fmt("duration"),
	q("maxDuration", "string", "traces lasting at most this long").fmt("duration"),
	q("errors", "boolean", "traces with a span in error"),
	q("name", "string", "the trace's name, case-insensitive: a zorka trace's type (HTTP, JMS, …), else the root span's operation"),
	q("service", "string", "traces with a span of this service"),
	q("operation", "string", "traces with a span of this operation (of the service, when service is given; names as /api/v1/names?service= lists them)"),
	q("attr", "string", "KEY=VALUE: traces with a span that has this attribute value (its own, its OpenTelemetry resource's or scope's); repeatable, each must hold").many(),
	q("q", "string", "TEXT (case-insensitive substring) or ~REGEX (RE2) in operation and class names, attribute keys and values, exception class and message of the root span (every span with deep)"),
	q("eql", "string", "an EQL expression (docs/QUERY.md) for the root span (any span with deep)").fmt("eql"),
	q("deep", "boolean", "q and eql look at every span, not just the root"),
	q("budget", "string", "stop searching after this long (default 5s, at most 60s)").fmt("duration"),
}

var searchParams = join(filterParams, []param{
	q("oldest", "boolean", "oldest first (default newest first)"),
	q("limit", "integer", "at most this many traces (1 to 100000)").dflt("20"),
	q("cursor", "string", "continue after the page that returned this cursor"),
})

var analysisParams = join(filterParams, []param{
	q("maxTraces", "integer", "read at most this many traces, newest first (1 to 1000000)").dflt("10000"),
})

var traceID = pathParam("id", "the trace id: 32 hex digits, or a Kieker traceId in decimal")

// routes is every endpoint but the UI's (set in init: the OpenAPI
// handler reads the table).
var routes []route

func init() { routes = table() }

func table() []route {
	return []route{
		// Health and metrics.
		{method: "GET", path: "/healthz", tag: "meta", auth: authNone, summary: "Liveness: 200 while the process serves HTTP", resp: "text/plain", h: healthz},
		{method: "GET", path: "/readyz", tag: "meta", auth: authNone, summary: "Readiness: 200 once the bridge runs, 503 while it starts or stops", resp: "text/plain", h: readyz},
		{method: "GET", path: "/metrics", tag: "meta", auth: authRead, summary: "Prometheus metrics (the metrics listener serves the same)", resp: "text/plain", mount: metricsHandler},
		{method: "GET", path: "/api/openapi.json", tag: "meta", auth: authNone, summary: "This API's OpenAPI 3.1 description", resp: "application/json", h: openAPI},

		// Traces.
		{method: "GET", path: "/api/v1/traces", tag: "traces", auth: authRead, summary: "Search traces (every filter of tracebridge query)", params: searchParams, resp: "SearchResult", h: withStore(searchTraces)},
		{method: "GET", path: "/api/v1/traces/{id}", tag: "traces", auth: authRead, summary: "A whole trace: the JSON of `traces --json`, or the text tree",
			params: []param{traceID, q("format", "string", "json (default), text (the tree query --trace-id prints), jaeger (Jaeger's JSON, as /api/traces/{traceID} answers) or otlp (OTLP/JSON, an ExportTraceServiceRequest)").oneOf("json", "text", "jaeger", "otlp")}, resp: "Trace", h: getTrace},
		{method: "GET", path: "/api/v1/traces/{id}/view", tag: "traces", auth: authRead, summary: "A trace summarised for display: the heaviest spans up to maxSpans, with counts of what was pruned",
			params: []param{traceID,
				q("maxSpans", "integer", "show at most this many spans (1 to 200000)").dflt("10000"),
				q("minDuration", "string", "leave out spans shorter than this (their counts stay)").fmt("duration"),
				q("root", "integer", "show the subtree of the span with this index"),
				q("reveal", "integer", "always show the span with this index and its ancestors (a search hit); repeatable").many(),
				q("attributes", "boolean", "include each span's attributes"),
			}, resp: "TraceView", h: traceView},
		{method: "GET", path: "/api/v1/traces/{id}/spans/{index}", tag: "traces", auth: authRead, summary: "One span in full: attributes, events, links, Kieker positions",
			params: []param{traceID, pathParam("index", "the span's index in the trace (tree order)")}, resp: "SpanDetail", h: getSpan},
		{method: "GET", path: "/api/v1/traces/{id}/find", tag: "traces", auth: authRead, summary: "Search inside a trace: the spans holding TEXT or matching ~REGEX, in tree order",
			params: []param{traceID,
				q("q", "string", "TEXT (substring) or ~REGEX (RE2)").req(),
				q("fields", "string", "where to look: classes, methods, attributes, exceptions or all (comma-separated)").dflt("all"),
				q("ignoreCase", "boolean", "ignore case"),
				q("limit", "integer", "at most this many hits (1 to 1000000)").dflt("10000"),
			}, resp: "FindResult", h: findInTrace},
		{method: "GET", path: "/api/v1/traces/{id}/rank", tag: "traces", auth: authRead, summary: "The method ranking: per operation calls, errors, total and self time, min and max",
			params: []param{traceID}, resp: "Ranking", h: rankTrace},
		{method: "GET", path: "/api/v1/traces/{id}/flame", tag: "traces", auth: authRead, summary: "The trace as a flame graph of call paths weighted by time",
			params: []param{traceID, q("format", "string", "json (a tree, default), folded (Brendan Gregg's folded stacks, self time in ns) or svg").oneOf("json", "folded", "svg")}, resp: "Flame", h: traceFlame},
		{method: "GET", path: "/api/v1/traces/{id}/sequence", tag: "traces", auth: authRead, summary: "UML sequence diagrams of the trace as Kieker's trace-analysis draws them: one per Kieker trace in it",
			params: []param{traceID, q("mode", "string", "lifelines per assembly component (default) or deployment component").oneOf("assembly", "deployment"),
				q("format", "string", "json (every diagram, default), svg (drawn by tracebridge, at most 2000 messages) or pic (Kieker's, for pic2plot)").oneOf("json", "svg", "pic"),
				q("index", "integer", "with svg or pic: which diagram (default 0)"), q("shortLabels", "boolean", "leave package names out")}, resp: "SequenceResult", h: traceSequence},
		{method: "GET", path: "/api/v1/traces/{id}/critical-path", tag: "traces", auth: authRead, summary: "The critical path: the chain of spans the trace's end waited for",
			params: []param{traceID}, resp: "CriticalPath", h: criticalPath},
		{method: "GET", path: "/api/v1/compare", tag: "traces", auth: authRead, summary: "Compare two traces: their call trees merged by path, with what was added, removed or changed",
			params: []param{q("a", "string", "the first trace id").req(), q("b", "string", "the second trace id").req()}, resp: "Comparison", h: withStore(compareTraces)},
		{method: "GET", path: "/api/v1/pivot", tag: "traces", auth: authRead, summary: "Statistics of the selected traces grouped by a root span attribute",
			params: join([]param{q("key", "string", "the root span's attribute to group by").req()}, filterParams), resp: "Pivot", h: withStore(pivot)},
		{method: "GET", path: "/api/v1/names", tag: "traces", auth: authRead, summary: "Trace names (zorka trace types, other traces' root operations) and services seen in the stored traces; with service, its operations",
			params: []param{q("host", "string", "names of this host's traces only"), q("service", "string", "also list this service's operations")}, resp: "Names", h: withStore(names)},

		// Analyses.
		{method: "GET", path: "/api/v1/analysis/graph", tag: "analysis", auth: authRead, summary: "A dependency graph (Kieker's) of the selected traces, with call counts and response times",
			params: join([]param{
				q("kind", "string", "the graph").oneOf("container", "deployment-component", "assembly-component", "deployment-operation", "assembly-operation", "aggregated-deployment-call-tree", "aggregated-assembly-call-tree").dflt("assembly-operation"),
				q("format", "string", "json (default) or dot (Graphviz, Kieker's style)").oneOf("json", "dot"),
				q("selfLoops", "boolean", "keep calls from a node to itself"),
			}, analysisParams), resp: "GraphResult", h: analysisGraph},
		{method: "GET", path: "/api/v1/analysis/operations", tag: "analysis", auth: authRead, summary: "Response-time statistics per operation of the selected traces",
			params: analysisParams, resp: "OperationsResult", h: analysisOperations},
		{method: "GET", path: "/api/v1/analysis/equivalence", tag: "analysis", auth: authRead, summary: "Kieker's trace equivalence classes of the selected traces: the distinct kinds of request and how many of each",
			params: join([]param{q("mode", "string", "compare executions by assembly component (default) or deployment component").oneOf("assembly", "deployment")}, analysisParams),
			resp:   "EquivalenceResult", h: analysisEquivalence},
		{method: "GET", path: "/api/v1/profiles/flame", tag: "analysis", auth: authRead, summary: "A JFR flame graph of a host in a time window (needs a JFR profile stage)",
			params: []param{q("host", "string", "the host").req(), q("since", "string", "window start (default 15m)").fmt("time"), q("until", "string", "window end (default now)").fmt("time"),
				q("kind", "string", "what is weighed: cpu (execution samples, default), alloc (bytes), alloc-tlab (bytes), lock (ns waited), io (ns), io-bytes (bytes), exceptions, errors (throws)").oneOf(flame.KindNames()...),
				q("format", "string", "json (a tree, default), folded or svg").oneOf("json", "folded", "svg")}, resp: "Flame", h: profileFlame},
		{method: "GET", path: "/api/v1/profiles/views", tag: "analysis", auth: authRead, summary: "JMC's views of a host's JFR events in a time window: GC pauses, heap after GC, contended monitors, slowest file and socket operations, exceptions by class (needs a JFR profile stage)",
			params: []param{q("host", "string", "the host").req(), q("since", "string", "window start (default 15m)").fmt("time"), q("until", "string", "window end (default now)").fmt("time")},
			resp:   "JFRViews", h: profileViews},
		{method: "GET", path: "/api/v1/jfr/types", tag: "analysis", auth: authRead, summary: "The event browser: hosts with JFR events, and every event type one sent with its count, fields and description (needs a JFR profile stage)",
			params: []param{q("host", "string", "the host whose types to list (none: only the hosts)")}, resp: "JFRTypes", h: jfrTypes},
		{method: "GET", path: "/api/v1/jfr/events", tag: "analysis", auth: authRead, summary: "The event browser: a host's recent events of one type, filtered by time, thread and field values, sorted and paged (stack traces cut to 5 frames)",
			params: jfrEventParams, resp: "JFREvents", h: jfrEvents},
		{method: "GET", path: "/api/v1/jfr/event", tag: "analysis", auth: authRead, summary: "The event browser: one event with its whole stack trace",
			params: []param{q("host", "string", "the host").req(), q("id", "integer", "the event's id (from /api/v1/jfr/events)").req()}, resp: "JFREvents", h: jfrEvent},

		// Hosts.
		{method: "GET", path: "/api/v1/hosts", tag: "hosts", auth: authRead, summary: "Hosts with group, last contact, stored size and traces per second", resp: "HostList", h: withHosts(listHosts)},
		{method: "GET", path: "/api/v1/hosts/{name}", tag: "hosts", auth: authRead, summary: "One host", params: []param{pathParam("name", "the host")}, resp: "Host", h: withHosts(getHost)},
		{method: "POST", path: "/api/v1/hosts", tag: "hosts", auth: authWrite, summary: "Add a host", body: "HostInput", resp: "Host", h: withHosts(addHost)},
		{method: "PATCH", path: "/api/v1/hosts/{name}", tag: "hosts", auth: authWrite, summary: "Change a host: address, secret, group, comment, bounds, enabled",
			params: []param{pathParam("name", "the host")}, body: "HostInput", resp: "Host", h: withHosts(patchHost)},
		{method: "DELETE", path: "/api/v1/hosts/{name}", tag: "hosts", auth: authWrite, summary: "Delete a host and every trace of its partition",
			params: []param{pathParam("name", "the host")}, resp: "Deleted", h: withHosts(deleteHost)},

		// The console.
		{method: "GET", path: "/api/v1/status", tag: "console", auth: authRead, summary: "The bridge: version, uptime, records, rates, queue, trace assembly", resp: "Status", h: status},
		{method: "GET", path: "/api/v1/receivers", tag: "console", auth: authRead, summary: "Receivers with their state, connections, records per second, errors", resp: "ReceiverList", h: withConsole(listReceivers)},
		{method: "POST", path: "/api/v1/receivers", tag: "console", auth: authWrite, summary: "Add a receiver (validated by its type's factory) and start it", body: "ReceiverInput", resp: "Receiver", h: withConsole(addReceiver)},
		{method: "POST", path: "/api/v1/receivers/{name}/stop", tag: "console", auth: authWrite, summary: "Stop a receiver (it drains first) and release its port",
			params: []param{pathParam("name", "the receiver")}, resp: "Receiver", h: withConsole(stopReceiver)},
		{method: "POST", path: "/api/v1/receivers/{name}/start", tag: "console", auth: authWrite, summary: "Start a stopped receiver again from its configuration",
			params: []param{pathParam("name", "the receiver")}, resp: "Receiver", h: withConsole(startReceiver)},
		{method: "GET", path: "/api/v1/receivers/{name}/mapping", tag: "console", auth: authRead, summary: "A KDB receiver's mapping: record ids and their types",
			params: []param{pathParam("name", "the receiver")}, resp: "Mapping", h: withConsole(getMapping)},
		{method: "PUT", path: "/api/v1/receivers/{name}/mapping", tag: "console", auth: authWrite, summary: "Save a KDB receiver's mapping (it applies when the receiver starts again)",
			params: []param{pathParam("name", "the receiver"), q("restart", "boolean", "restart the receiver now if it runs")}, body: "MappingInput", resp: "Mapping", h: withConsole(putMapping)},
		{method: "GET", path: "/api/v1/sinks", tag: "console", auth: authRead, summary: "Sinks with their records per second, errors, drops and queue depth", resp: "SinkList", h: withConsole(listSinks)},
		{method: "GET", path: "/api/v1/component-types", tag: "console", auth: authRead, summary: "The receiver, stage and sink types and their configuration keys (for the console's forms)", resp: "ComponentTypes", h: withConsole(componentTypes)},
		{method: "GET", path: "/api/v1/record-types", tag: "console", auth: authRead, summary: "The record types of the catalogue (built-in and IRL) with their fields", resp: "RecordTypes", h: withConsole(recordTypes)},
		{method: "GET", path: "/api/v1/config", tag: "console", auth: authSecret, summary: "The effective configuration as YAML (receivers added from the console included)", resp: "application/yaml", h: withConsole(getConfig)},
		{method: "GET", path: "/api/v1/cluster", tag: "console", auth: authRead, summary: "The cluster as this node sees it: nodes, partition owners and lag, stream and store health, what is degraded (404 on a bridge that runs alone)", resp: "Cluster", h: clusterStatus},
		{method: "", path: "/api/live", tag: "console", auth: authRead, summary: "The live view (WebSocket); 503 until a component provides it", resp: "websocket", mount: liveHandler},

		// Jaeger's query API.
		{method: "GET", path: "/api/services", tag: "jaeger", auth: authRead, jaeger: true, summary: "Jaeger: the services", resp: "JaegerStrings", h: withStore(jaegerServices)},
		{method: "GET", path: "/api/services/{service}/operations", tag: "jaeger", auth: authRead, jaeger: true, summary: "Jaeger: a service's operation names",
			params: []param{pathParam("service", "the service")}, resp: "JaegerStrings", h: withStore(jaegerServiceOperations)},
		{method: "GET", path: "/api/operations", tag: "jaeger", auth: authRead, jaeger: true, summary: "Jaeger: a service's operations with their span kinds",
			params: []param{q("service", "string", "the service").req(), q("spanKind", "string", "only operations of this kind").oneOf("server", "client", "producer", "consumer", "internal", "unspecified")}, resp: "JaegerOperations", h: withStore(jaegerOperations)},
		{method: "GET", path: "/api/traces", tag: "jaeger", auth: authRead, jaeger: true, summary: "Jaeger: search traces of a service",
			params: []param{
				q("service", "string", "the service (required unless traceID is given)"),
				q("operation", "string", "a span of the service with this operation"),
				q("tags", "string", `a JSON object of tags a span of the service must have: {"http.status_code":"500"}`),
				q("tag", "string", "key:value, repeatable, as tags").many(),
				q("minDuration", "string", "a span of the service lasting at least this long (Go syntax)").fmt("duration"),
				q("maxDuration", "string", "a span of the service lasting at most this long").fmt("duration"),
				q("start", "integer", "traces that started at or after, µs since the epoch (default: end − 48h)"),
				q("end", "integer", "traces that started at or before, µs since the epoch (default: now)"),
				q("limit", "integer", "at most this many traces (default 100)"),
				q("lookback", "string", "ignored (Jaeger's UI turns it into start)"),
				q("traceID", "string", "these traces (repeatable); the other parameters are then ignored").many(),
			}, resp: "JaegerTraces", h: withStore(jaegerSearch)},
		{method: "GET", path: "/api/traces/{traceID}", tag: "jaeger", auth: authRead, jaeger: true, summary: "Jaeger: one trace",
			params: []param{pathParam("traceID", "up to 32 hex digits")}, resp: "JaegerTraces", h: withStore(jaegerTrace)},
		{method: "GET", path: "/api/dependencies", tag: "jaeger", auth: authRead, jaeger: true, summary: "Jaeger: calls between services, every cross-service parent→child call counted",
			params: []param{q("endTs", "integer", "window end, ms since the epoch (default now)"), q("lookback", "integer", "window length, ms (default 24h)")}, resp: "JaegerDependencies", h: withStore(jaegerDependencies)},
	}
}
