package eql

import (
	"time"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// t0 is the traces' start: 2024-03-01T12:00:00Z.
var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()

const ms = int64(time.Millisecond)

// kiekerTrace is a Kieker-like trace (operation signatures, classes, one
// host), 800 ms long:
//
//	0 OrderServlet.doGet         0–800 ms
//	1   OrderDao.findAll        50–650 ms  SQL, rows
//	2     OrderDao.connect      60–160 ms  error
//	3   Cache.put              700–750 ms
func kiekerTrace() *trace.Trace {
	sp := func(id, parent trace.SpanID, pidx, depth int32, op, class string, from, to int64, err bool, attrs ...trace.Attr) trace.Span {
		return trace.Span{
			SpanID: id, ParentID: parent, Parent: pidx, Depth: depth,
			Operation: op, Component: class, Host: "web1",
			Start: t0 + from*ms, End: t0 + to*ms, Error: err,
			Attributes: attrs, Source: trace.FromEvents, EOI: -1, ESS: -1,
		}
	}
	return &trace.Trace{ID: trace.KiekerID(4711), Spans: []trace.Span{
		sp(1, 0, -1, 0, "public void org.shop.web.OrderServlet.doGet(javax.servlet.http.HttpServletRequest,javax.servlet.http.HttpServletResponse)", "org.shop.web.OrderServlet", 0, 800, false),
		sp(2, 1, 0, 1, "public java.util.List org.shop.dao.OrderDao.findAll()", "org.shop.dao.OrderDao", 50, 650, false,
			trace.Attr{Key: "SQL", Value: "select * from orders", Type: trace.TypeString},
			trace.Attr{Key: "rows", Value: "42", Type: trace.TypeInt}),
		sp(3, 2, 1, 2, "private void org.shop.dao.OrderDao.connect()", "org.shop.dao.OrderDao", 60, 160, true),
		sp(4, 1, 0, 1, "public void org.shop.Cache.put(java.lang.Object)", "org.shop.Cache", 700, 750, false),
	}}
}

// otlpTrace is an OTLP-like trace (span names, a service, attributes of
// every type), 1 s long:
//
//	0 GET /api/orders     0–1000 ms  server, attributes of every type
//	1   SELECT orders   100–300 ms   client, error
func otlpTrace() *trace.Trace {
	a := func(k, v string, t trace.ValueType) trace.Attr { return trace.Attr{Key: k, Value: v, Type: t} }
	return &trace.Trace{ID: trace.ID{Hi: 0x0af7651916cd43dd, Lo: 0x8448eb211c80319c}, Spans: []trace.Span{
		{
			SpanID: 0xb7ad6b7169203331, Parent: -1, Operation: "GET /api/orders",
			Component: "io.opentelemetry.tomcat", Service: "orders", Kind: trace.KindServer,
			Start: t0, End: t0 + 1000*ms, Source: trace.FromSpan,
			Attributes: []trace.Attr{
				a("http.method", "GET", trace.TypeString),
				a("http.status_code", "503", trace.TypeInt),
				a("http.flavor", "1.1", trace.TypeString),
				a("cached", "false", trace.TypeBool),
				a("sampled", "true", trace.TypeString),
				a("ratio", "0.25", trace.TypeDouble),
				a("payload", "aGVsbG8=", trace.TypeBytes),
				a("tags", `["a","b"]`, trace.TypeJSON),
				a("zip", "007", trace.TypeString),
				a("big", "99999999999999999999", trace.TypeString),
				a("neg", "-5", trace.TypeString),
				a("empty", "", trace.TypeString),
				a("nan", "NaN", trace.TypeDouble),
				a("notnum", "12abc", trace.TypeInt),
				a("mask", "12", trace.TypeInt),
				a("method", "POST", trace.TypeString),
				a("my-key", "x", trace.TypeString),
			},
		},
		{
			SpanID: 0x00f067aa0ba902b7, ParentID: 0xb7ad6b7169203331, Parent: 0, Depth: 1,
			Operation: "SELECT orders", Component: "io.opentelemetry.jdbc", Service: "orders",
			Host: "db-host", Kind: trace.KindClient, Status: trace.StatusError, Error: true,
			Start: t0 + 100*ms, End: t0 + 300*ms, Source: trace.FromSpan,
			Attributes: []trace.Attr{a("db.system", "postgresql", trace.TypeString)},
		},
	}}
}

// sampleTraces are the traces fuzzing and the property test evaluate on.
func sampleTraces() []*trace.Trace {
	broken := kiekerTrace()
	broken.Spans[2].Parent = 7 // a parent index out of place
	return []*trace.Trace{kiekerTrace(), otlpTrace(), broken, {Spans: []trace.Span{{Parent: -1}}}}
}

// sampleQueries are zico-style queries: the seed corpus of the fuzz
// target and of the property test.
var sampleQueries = []string{
	`time > 500ms and class ~= "Dao"`,
	`errors > 0 or http.status_code >= 500`,
	`trace = 'GET /api/orders' and pct > 50 --deep`,
	`method = 'execute'`,
	`class = 'com.mysql.jdbc.PreparedStatement' and method = 'execute'`,
	`SQL = 'select 1'`,
	`SQL = null`,
	`SQL <> null`,
	`SQL != null`,
	`t < 20 and method <> 'create'`,
	`not a = 2 and ! b = c`,
	`2 * 2 + 3 * 3`,
	`2*(3+3)`,
	`1m+5s`,
	`'ab' + 'cd'`,
	`1 | 2 ^ 3 & 4`,
	`~ -1`,
	`0x0f + -0x04 + 1L + -0x0fL`,
	`123.456789ms = 123456789`,
	`'ab\ncd' ~= '^ab'`,
	"time >= 1.5s // slow\n and calls > 10",
	"signature ~= '(?i)orderdao' -- case-insensitive\nor host == \"web1\"",
	`clock > 1700000000000000000 && clock < 1800000000000000000`,
	`type = 'HTTP' || type = 'SQL'`,
	"`my-key` = 'x' and `method` = 'POST'",
	`(calls - errors) * 100 / calls < 50`,
	`rows % 2 = 0 and rows / 4 = 10`,
	`ratio * 4 = 1 and zip = '007' and zip = 7`,
	`NOT (errors = 0) AND Time > 0`,
}
