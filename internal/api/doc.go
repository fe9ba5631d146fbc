// Package api is tracebridge's HTTP API: a REST JSON API for everything
// the web UI does (trace search, a trace and its views, analyses, hosts,
// receivers and the console), Jaeger's query API over the same trace
// store (so Grafana's Jaeger data source and Jaeger's UI can read it),
// the OpenAPI description of the REST API, and authentication with
// hashed tokens. docs/API.md documents every endpoint; internal/apiclient
// is the client `tracebridge query --url` uses.
//
// The API routes; it does not analyse: a handler parses its parameters,
// calls the store or internal/analysis (trace views, critical path,
// comparison, flame graphs, Kieker's analyses) and encodes the answer.
//
// internal/serve owns the listener and mounts the handler New returns
// when the configuration has an `http:` section; the API knows the
// running bridge only through Options (the trace store, the Console and
// Counters interfaces serve implements over the engine and the
// configuration, the metrics registry and the services components
// publish in pipeline.Shared); it imports neither internal/engine nor
// internal/config.
//
// Every route is a row of one table (routes.go): its method and path,
// parameters, who may call it, and the handler. The table registers the
// routes, checks every request's parameters (an unknown parameter is a
// 400) and generates the OpenAPI description, so the three cannot
// disagree.
//
// Limits: searches and analyses run within a time budget (default 5 s
// and 10 s, at most 60 s) and a bound on the traces they read; regular
// expressions are RE2 (linear time) of at most 4096 bytes; request bodies
// are at most 1 MiB; a trace view shows at most 200,000 spans.
//
// Concurrency: handlers run on net/http's goroutines and share nothing
// but the token cache (the catalogue of services is the store's, kept as
// traces arrive). Close stops new requests from using the store and waits
// (at most 5 s) for those that do: the engine calls it before it closes
// its sinks.
package api
