package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/clusterstatus"
	"github.com/tracebridge/tracebridge/internal/jfrview"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// The OpenAPI document is generated from the route table and the Go
// types of the answers, so it says what the code does.

// schemaTypes maps the schema names of the route table to the types
// whose JSON they describe.
var schemaTypes = map[string]any{
	"SearchResult":      SearchResult{},
	"TraceView":         TraceView{},
	"SpanDetail":        SpanDetail{},
	"FindResult":        FindResult{},
	"Ranking":           Ranking{},
	"Flame":             Flame{},
	"JFRViews":          jfrview.Views{},
	"JFRTypes":          JFRTypes{},
	"JFREvents":         JFREvents{},
	"CriticalPath":      CriticalPath{},
	"Comparison":        Comparison{},
	"Pivot":             PivotResult{},
	"Names":             Names{},
	"OperationsResult":  OperationsResult{},
	"SequenceResult":    SequenceResult{},
	"EquivalenceResult": EquivalenceResult{},
	"HostList":          HostList{},
	"Host":              HostInfo{},
	"HostInput":         HostInput{},
	"Deleted":           Deleted{},
	"Status":            StatusInfo{},
	"ReceiverList":      ReceiverList{},
	"Receiver":          ReceiverInfo{},
	"ReceiverInput":     ReceiverInput{},
	"Mapping":           Mapping{},
	"MappingInput":      MappingInput{},
	"SinkList":          SinkList{},
	"ComponentTypes":    ComponentTypes{},
	"RecordTypes":       RecordTypes{},
	"Cluster":           clusterstatus.Status{},
	"Error":             errorBody{},
}

// Schemas written by hand: JSON made without a Go type of its own.
var handSchemas = map[string]any{
	"Trace": obj("A whole trace as `tracebridge traces --json` prints it (trace.AppendJSON)", map[string]any{
		"traceId": str("the trace id: a Kieker traceId in decimal, other ids in 32 hex digits"), "start": integer("unix ns"),
		"end": integer("unix ns"), "durationNs": integer(""), "hosts": arr(str("")), "part": integer("the part of a trace too large to hold (absent: the whole)"),
		"resources": arr(obj("an OpenTelemetry resource of the trace's spans, once (absent: none, as for Kieker and zorka)", map[string]any{
			"attributes": map[string]any{"type": "object", "description": "every attribute of the resource, service.name and host.name included"}})),
		"scopes": arr(obj("an instrumentation scope of the trace's spans, once (absent: none)", map[string]any{
			"name": str(""), "version": str(""), "attributes": map[string]any{"type": "object"}})),
		"spans": arr(obj("a span, in tree order", map[string]any{
			"resource": integer("the index of the span's resource in resources (absent: none)"),
			"scope":    integer("the index of the span's scope in scopes (absent: none)"),
			"spanId":   str("16 hex digits"), "parentSpanId": map[string]any{"type": []string{"string", "null"}},
			"operation": str(""), "component": str(""), "host": str(""), "service": str(""), "thread": str(""),
			"start": integer("unix ns"), "end": integer("unix ns"), "error": boolean(""), "kind": str(""),
			"statusMessage": str(""), "attributes": map[string]any{"type": "object", "description": "attributes with their JSON types; Kieker's positions as kieker.*"},
			"links": arr(map[string]any{"type": "object"}), "events": arr(map[string]any{"type": "object"}),
		})),
		"broken": arr(str("why the trace is not sound")),
	}),
	"GraphResult": obj("A dependency graph or aggregated call tree (internal/analysis)", map[string]any{
		"kind": str(""),
		"graph": obj("", map[string]any{
			"nodes": arr(obj("", map[string]any{"id": str(""), "container": nullable("string"), "component": nullable("string"), "operation": nullable("string"),
				"stats": graphStats("response times of the calls into the node (from every caller)")})),
			"edges": arr(obj("", map[string]any{"from": str(""), "to": str(""), "calls": integer(""), "order": integer(""),
				"stats": graphStats("response times of the calls along the edge (this caller's only)")})),
		}),
		"summary": ref("AnalysisSummary"),
	}),
	"JaegerStrings":      jaegerEnvelope(arr(str(""))),
	"JaegerOperations":   jaegerEnvelope(arr(schemaOf(reflect.TypeFor[jOperation]()))),
	"JaegerTraces":       jaegerEnvelope(arr(schemaOf(reflect.TypeFor[jTrace]()))),
	"JaegerDependencies": jaegerEnvelope(arr(schemaOf(reflect.TypeFor[jDependency]()))),
	"AnalysisSummary":    schemaOf(reflect.TypeFor[AnalysisSummary]()),
}

func graphStats(desc string) map[string]any {
	return obj(desc, map[string]any{"count": integer(""), "minNs": integer(""), "avgNs": integer(""), "maxNs": integer(""), "totalNs": integer("")})
}

func obj(desc string, props map[string]any) map[string]any {
	m := map[string]any{"type": "object", "properties": props}
	if desc != "" {
		m["description"] = desc
	}
	return m
}
func str(desc string) map[string]any     { return typed("string", desc) }
func integer(desc string) map[string]any { return typed("integer", desc) }
func boolean(desc string) map[string]any { return typed("boolean", desc) }
func arr(items any) map[string]any       { return map[string]any{"type": "array", "items": items} }
func nullable(t string) map[string]any   { return map[string]any{"type": []string{t, "null"}} }
func ref(name string) map[string]any     { return map[string]any{"$ref": "#/components/schemas/" + name} }

func typed(t, desc string) map[string]any {
	m := map[string]any{"type": t}
	if desc != "" {
		m["description"] = desc
	}
	return m
}

func jaegerEnvelope(data any) map[string]any {
	return obj("Jaeger's envelope", map[string]any{
		"data": data, "total": integer("the number of items in data"), "limit": integer("always 0"), "offset": integer("always 0"),
		"errors": map[string]any{"type": []string{"array", "null"}, "items": schemaOf(reflect.TypeFor[jError]())},
	})
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// refTypes are described once, as components, and referred to (the
// recursive ones must be).
var refTypes = map[reflect.Type]string{reflect.TypeFor[FlameNode](): "FlameNode", reflect.TypeFor[ConfigKey](): "ConfigKey"}

// schemaOf describes the JSON encoding/json makes of a type.
func schemaOf(t reflect.Type) map[string]any {
	if name, ok := refTypes[t]; ok {
		return ref(name)
	}
	if t.Kind() == reflect.Pointer {
		if name, ok := refTypes[t.Elem()]; ok {
			return ref(name)
		}
	}
	return schemaBody(t)
}

func schemaBody(t reflect.Type) map[string]any {
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case rawType:
		return map[string]any{"description": "any JSON value"}
	case reflect.TypeFor[trace.ID]():
		return str("")
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := schemaOf(t.Elem())
		if ty, ok := s["type"].(string); ok {
			s["type"] = []string{ty, "null"}
		}
		return s
	case reflect.Bool:
		return boolean("")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return integer("")
	case reflect.Float32, reflect.Float64:
		return typed("number", "")
	case reflect.String:
		return str("")
	case reflect.Slice, reflect.Array:
		return arr(schemaOf(t.Elem()))
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.Interface:
		return map[string]any{"description": "any JSON value"}
	case reflect.Struct:
		if t == reflect.TypeFor[flex]() {
			return map[string]any{"type": []string{"string", "integer"}}
		}
		props := map[string]any{}
		structProps(t, props)
		return map[string]any{"type": "object", "properties": props}
	}
	return map[string]any{}
}

func structProps(t reflect.Type, props map[string]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			structProps(f.Type, props)
			continue
		}
		if name == "" {
			name = f.Name
		}
		if f.Type == reflect.TypeFor[map[string]json.RawMessage]() {
			props[name] = map[string]any{"type": "object", "description": "attributes with their JSON types"}
			continue
		}
		switch {
		case slices.Contains(strings.Split(opts, ","), "string") && f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Uint64:
			// encoding/json's string option: an id JavaScript would round
			// as a number.
			props[name] = map[string]any{"type": "string", "format": "int64", "description": "an integer in decimal digits (exact where a JSON number above 2^53 is rounded)"}
		case f.Tag.Get("openapi") == "nullable":
			s := schemaOf(f.Type)
			if ty, ok := s["type"].(string); ok {
				s["type"] = []string{ty, "null"}
			}
			props[name] = s
		default:
			props[name] = schemaOf(f.Type)
		}
	}
}

var (
	openAPIOnce sync.Once
	openAPIDoc  []byte
)

// OpenAPI returns the OpenAPI 3.1 document of the API.
func OpenAPI() []byte {
	openAPIOnce.Do(func() {
		paths := map[string]map[string]any{}
		for i := range routes {
			rt := &routes[i]
			method := strings.ToLower(rt.method)
			if method == "" {
				method = "get"
			}
			op := map[string]any{"summary": rt.summary, "tags": []string{rt.tag}, "operationId": operationID(rt)}
			var ps []any
			for _, p := range rt.params {
				sch := map[string]any{"type": p.typ}
				if p.format != "" {
					sch["format"] = p.format
				}
				if len(p.enum) > 0 {
					sch["enum"] = p.enum
				}
				if p.def != "" {
					sch["default"] = p.def
				}
				if p.repeat {
					sch = arr(sch)
				}
				pm := map[string]any{"name": p.name, "in": p.in, "description": p.desc, "required": p.required || p.in == inPath, "schema": sch}
				if p.repeat {
					pm["explode"] = true
				}
				ps = append(ps, pm)
			}
			if len(ps) > 0 {
				op["parameters"] = ps
			}
			switch rt.auth {
			case authNone:
				op["security"] = []any{}
			case authRead:
				op["security"] = []any{map[string]any{}, map[string]any{"token": []string{}}}
				op["description"] = "Open on loopback (unless read_token_required); a token from elsewhere."
			default:
				op["security"] = []any{map[string]any{"token": []string{}}}
				op["description"] = "Needs an API token."
			}
			if rt.body != "" {
				op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": ref(rt.body)}}}
			}
			ok := map[string]any{"description": "OK"}
			switch {
			case strings.Contains(rt.resp, "/"):
				ok["content"] = map[string]any{rt.resp: map[string]any{"schema": str("")}}
			case rt.resp == "websocket":
				ok["description"] = "a WebSocket (101 Switching Protocols)"
			case rt.resp != "":
				ok["content"] = map[string]any{"application/json": map[string]any{"schema": ref(rt.resp)}}
			}
			errSchema := ref("Error")
			if rt.jaeger {
				errSchema = ref("JaegerStrings")
			}
			errResp := func(d string) map[string]any {
				return map[string]any{"description": d, "content": map[string]any{"application/json": map[string]any{"schema": errSchema}}}
			}
			op["responses"] = map[string]any{"200": ok, "400": errResp("a bad parameter or body (the message says which)"),
				"401": errResp("a token is needed, or it is wrong"), "404": errResp("not found"), "503": errResp("no trace store, or the bridge is stopping")}
			if paths[rt.path] == nil {
				paths[rt.path] = map[string]any{}
			}
			paths[rt.path][method] = op
		}
		schemas := map[string]any{}
		for name, v := range schemaTypes {
			schemas[name] = schemaOf(reflect.TypeOf(v))
		}
		for name, s := range handSchemas {
			schemas[name] = s
		}
		schemas["PivotRow"] = schemaOf(reflect.TypeFor[store.PivotRow]())
		for t, name := range refTypes {
			schemas[name] = schemaBody(t)
		}
		doc := map[string]any{
			"openapi": "3.1.0",
			"info": map[string]any{"title": "tracebridge HTTP API", "version": "1",
				"description": "The REST API of tracebridge's web UI and Jaeger's query API over the trace store. docs/API.md describes every endpoint."},
			"paths": paths,
			"components": map[string]any{
				"schemas":         schemas,
				"securitySchemes": map[string]any{"token": map[string]any{"type": "http", "scheme": "bearer", "description": "an API token of `tracebridge token`"}},
			},
		}
		openAPIDoc, _ = json.MarshalIndent(doc, "", "  ")
		openAPIDoc = append(openAPIDoc, '\n')
	})
	return openAPIDoc
}

// operationID names a route: its method and path in camel case.
func operationID(rt *route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(rt.method))
	if rt.method == "" {
		b.WriteString("any")
	}
	for _, part := range strings.FieldsFunc(rt.path, func(r rune) bool { return r == '/' || r == '-' || r == '.' }) {
		part = strings.Trim(part, "{}")
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func openAPI(c *call) error { return c.raw("application/json", OpenAPI()) }
