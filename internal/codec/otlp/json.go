package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/tracebridge/tracebridge/internal/record"
)

// The enum names of OTLP/JSON.
var (
	kindNames   = []string{"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"}
	statusNames = []string{"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"}
)

// DecodeJSON decodes an ExportTraceServiceRequest in OTLP/JSON into span
// records, as DecodeProto does.
func (d *Decoder) DecodeJSON(msg []byte, b *record.Batch, next func() *record.Batch) (Result, error) {
	d.start(b, next)
	if len(msg) > d.opt.MaxMessageSize {
		return d.finish(&Error{Offset: d.opt.MaxMessageSize, Reason: fmt.Sprintf("message of %d bytes exceeds the limit of %d", len(msg), d.opt.MaxMessageSize), Err: ErrTooLarge})
	}
	j := &js{buf: msg}
	if j.peek() != '{' {
		j.fail("want an object")
	}
	for ok := j.object(); ok; ok = j.more('}') {
		switch string(j.key()) {
		case "resourceSpans", "resource_spans":
			for ok := j.array(); ok; ok = j.more(']') {
				d.jsonResourceSpans(j)
			}
		default:
			j.skip()
		}
	}
	j.end()
	return d.finish(j.errOrNil())
}

// deferred is a member whose value is read after the rest of its object
// (spans, once their resource and scope are known).
type deferred struct{ pos, depth int }

// later notes where the current member's value starts and skips it.
func later(j *js, list []deferred) []deferred {
	j.ws()
	list = append(list, deferred{j.pos, j.depth})
	j.skip()
	return list
}

// again reads the deferred values with read, then goes back to where j
// was.
func again(j *js, list []deferred, read func()) {
	pos, depth := j.pos, j.depth
	for _, l := range list {
		if j.err != nil {
			return
		}
		j.pos, j.depth = l.pos, l.depth
		read()
	}
	j.pos, j.depth = pos, depth
}

func (d *Decoder) jsonResourceSpans(j *js) {
	d.res.reset()
	nattrs := 0
	var scopes, old []deferred
	for ok := j.object(); ok; ok = j.more('}') {
		switch string(j.key()) {
		case "resource":
			at := j.pos
			for ok := j.object(); ok; ok = j.more('}') {
				switch string(j.key()) {
				case "attributes":
					for ok := j.array(); ok; ok = j.more(']') {
						d.resetNodes()
						key, val, problem := d.jsonKV(j, 1)
						nattrs++
						switch {
						case j.err != nil:
						case problem != "":
							d.res.rejectf(at, "attribute: %s", problem)
						case nattrs > d.opt.MaxAttributes:
							d.res.rejectf(at, "more than %d attributes", d.opt.MaxAttributes)
						case d.res.reject == "":
							v, t, _ := d.text(val)
							d.addResourceAttr(attr{d.str(key), v, t})
						}
					}
				case "droppedAttributesCount", "dropped_attributes_count":
					j.uint("dropped_attributes_count", 32)
				default:
					j.skip()
				}
			}
		case "scopeSpans", "scope_spans":
			scopes = later(j, scopes)
		case "deprecatedScopeSpans", "deprecated_scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans":
			old = later(j, old)
		case "schemaUrl", "schema_url":
			j.str()
		default:
			j.skip()
		}
	}
	if len(scopes) == 0 {
		scopes = old
	}
	again(j, scopes, func() {
		for ok := j.array(); ok; ok = j.more(']') {
			d.jsonScopeSpans(j)
		}
	})
}

func (d *Decoder) jsonScopeSpans(j *js) {
	d.resetScope()
	scopeReject := ""
	var spans []deferred
	for ok := j.object(); ok; ok = j.more('}') {
		switch string(j.key()) {
		case "scope", "instrumentationLibrary", "instrumentation_library":
			for ok := j.object(); ok; ok = j.more('}') {
				switch string(j.key()) {
				case "name":
					at := j.pos
					name := j.str()
					if len(name) > d.opt.MaxStringLen {
						if scopeReject == "" {
							scopeReject = fmt.Sprintf("scope name at offset %d: %d bytes, limit %d", at, len(name), d.opt.MaxStringLen)
						}
						break
					}
					d.scope = d.str(name)
				case "attributes":
					for ok := j.array(); ok; ok = j.more(']') {
						at := j.pos
						d.resetNodes()
						key, val, problem := d.jsonKV(j, 1)
						if j.err == nil {
							d.addScopeAttr(at, key, val, problem, &scopeReject)
						}
					}
				case "version":
					at := j.pos
					d.setScopeVersion(at, j.str(), &scopeReject)
				case "droppedAttributesCount", "dropped_attributes_count":
					j.uint("dropped_attributes_count", 32)
				default:
					j.skip()
				}
			}
		case "spans":
			spans = later(j, spans)
		case "schemaUrl", "schema_url":
			j.str()
		default:
			j.skip()
		}
	}
	again(j, spans, func() {
		for ok := j.array(); ok; ok = j.more(']') {
			d.jsonSpan(j)
			if j.err != nil {
				return
			}
			if scopeReject != "" {
				d.sp.rejectf("%s", scopeReject)
			}
			d.addSpan()
		}
	})
}

// jsonID reads a hex id of n bytes into words (zero when empty); another
// length or bad hex rejects the span.
func (d *Decoder) jsonID(j *js, what string, n int) (hi, lo uint64) {
	s := j.str()
	if j.err != nil || len(s) == 0 {
		return 0, 0
	}
	var b [16]byte
	if len(s) != 2*n {
		d.sp.rejectf("%s of %d hex digits, want %d", what, len(s), 2*n)
		return 0, 0
	}
	if _, err := hex.Decode(b[:n], s); err != nil {
		d.sp.rejectf("%s %q is not hex", what, s)
		return 0, 0
	}
	if n == 8 {
		return 0, beUint64(b[:8])
	}
	return beUint64(b[:8]), beUint64(b[8:])
}

func (d *Decoder) jsonSpan(j *js) {
	s := &d.sp
	j.ws()
	s.reset(j.pos)
	for ok := j.object(); ok; ok = j.more('}') {
		switch string(j.key()) {
		case "traceId", "trace_id":
			s.traceHi, s.traceLo = d.jsonID(j, "trace id", 16)
		case "spanId", "span_id":
			_, s.id = d.jsonID(j, "span id", 8)
		case "parentSpanId", "parent_span_id":
			_, s.parent = d.jsonID(j, "parent span id", 8)
		case "traceState", "trace_state":
			s.traceState = d.spanString(j.str(), "trace state")
		case "name":
			s.name = d.spanString(j.str(), "name")
		case "kind":
			s.kind = j.enum("kind", kindNames)
		case "startTimeUnixNano", "start_time_unix_nano":
			s.start = j.uint("start_time_unix_nano", 64)
		case "endTimeUnixNano", "end_time_unix_nano":
			s.end = j.uint("end_time_unix_nano", 64)
		case "flags":
			s.flags = uint32(j.uint("flags", 32))
		case "attributes":
			for ok := j.array(); ok; ok = j.more(']') {
				at := j.pos
				d.resetNodes()
				key, val, problem := d.jsonKV(j, 1)
				switch {
				case j.err != nil:
				case problem != "":
					s.rejectf("attribute at offset %d: %s", at, problem)
				case len(s.attrs) >= d.opt.MaxAttributes:
					s.rejectf("more than %d attributes", d.opt.MaxAttributes)
				case s.reject == "":
					v, t, _ := d.text(val)
					s.attrs = append(s.attrs, attr{d.str(key), v, t})
				}
			}
		case "events":
			for ok := j.array(); ok; ok = j.more(']') {
				d.jsonEvent(j)
			}
		case "links":
			for ok := j.array(); ok; ok = j.more(']') {
				d.jsonLink(j)
			}
		case "status":
			for ok := j.object(); ok; ok = j.more('}') {
				switch string(j.key()) {
				case "message":
					s.statusMsg = d.spanString(j.str(), "status message")
				case "code":
					s.status = j.enum("status code", statusNames)
				default:
					j.skip()
				}
			}
		case "droppedAttributesCount", "dropped_attributes_count", "droppedEventsCount", "dropped_events_count", "droppedLinksCount", "dropped_links_count":
			j.uint("dropped count", 32)
		default:
			j.skip()
		}
	}
}

// jsonAttrs reads an array of KeyValues into attrs.
func (d *Decoder) jsonAttrs(j *js, attrs *attrObject) {
	for ok := j.array(); ok; ok = j.more(']') {
		if key, val, prob := d.jsonKV(j, 1); j.err == nil {
			d.addAttr(attrs, key, val, prob)
		}
	}
}

func (d *Decoder) jsonEvent(j *js) {
	j.ws()
	at := j.pos
	var name []byte
	var t uint64
	attrs := d.newAttrObject()
	for ok := j.object(); ok; ok = j.more('}') {
		switch string(j.key()) {
		case "timeUnixNano", "time_unix_nano":
			t = j.uint("time_unix_nano", 64)
		case "name":
			name = d.stable(j.str())
		case "attributes":
			d.jsonAttrs(j, &attrs)
		case "droppedAttributesCount", "dropped_attributes_count":
			j.uint("dropped_attributes_count", 32)
		default:
			j.skip()
		}
	}
	if j.err != nil {
		return
	}
	d.addEvent(at, name, t, &attrs)
}

func (d *Decoder) jsonLink(j *js) {
	j.ws()
	at := j.pos
	var hi, lo, id uint64
	var state []byte
	idProblem := ""
	attrs := d.newAttrObject()
	// Ids are checked here, not as the span's: a bad one names the link.
	readID := func(what string, size int) (uint64, uint64) {
		idAt := j.pos
		b := j.str()
		if j.err != nil || len(b) == 0 {
			return 0, 0
		}
		var raw [16]byte
		if len(b) != 2*size {
			if idProblem == "" {
				idProblem = fmt.Sprintf("%s at offset %d of %d hex digits, want %d", what, idAt, len(b), 2*size)
			}
			return 0, 0
		}
		if _, err := hex.Decode(raw[:size], b); err != nil {
			if idProblem == "" {
				idProblem = fmt.Sprintf("%s at offset %d is not hex", what, idAt)
			}
			return 0, 0
		}
		if size == 8 {
			return 0, beUint64(raw[:8])
		}
		return beUint64(raw[:8]), beUint64(raw[8:])
	}
	for ok := j.object(); ok; ok = j.more('}') {
		switch string(j.key()) {
		case "traceId", "trace_id":
			hi, lo = readID("trace id", 16)
		case "spanId", "span_id":
			_, id = readID("span id", 8)
		case "traceState", "trace_state":
			b := j.str()
			if len(b) > d.opt.MaxStringLen {
				if attrs.problem == "" {
					attrs.problem = fmt.Sprintf("trace state of %d bytes, limit %d", len(b), d.opt.MaxStringLen)
				}
				break
			}
			state = d.stable(b)
		case "attributes":
			d.jsonAttrs(j, &attrs)
		case "droppedAttributesCount", "dropped_attributes_count":
			j.uint("dropped_attributes_count", 32)
		case "flags":
			j.uint("flags", 32)
		default:
			j.skip()
		}
	}
	if j.err != nil {
		return
	}
	d.addLink(at, idProblem, hi, lo, id, state, &attrs)
}

// stable returns b, copied into the node strings when it is the
// scanner's scratch, so that it lives until resetNodes.
func (d *Decoder) stable(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	start := len(d.strs)
	d.strs = append(d.strs, b...)
	return d.strs[start:len(d.strs):len(d.strs)]
}

// jsonKV reads a KeyValue object into the node arena.
func (d *Decoder) jsonKV(j *js, depth int) (key []byte, val int32, problem string) {
	val = -1
	for ok := j.object(); ok; ok = j.more('}') {
		switch string(j.key()) {
		case "key":
			key = d.stable(j.str())
		case "value":
			v, prob := d.jsonAny(j, depth)
			if prob != "" && problem == "" {
				problem = prob
			}
			if v >= 0 {
				val = v
			}
		default:
			j.skip()
		}
	}
	if len(key) > d.opt.MaxStringLen && problem == "" {
		problem = fmt.Sprintf("key of %d bytes, limit %d", len(key), d.opt.MaxStringLen)
	}
	if val < 0 {
		val = d.newNode(nEmpty)
	}
	return key, val, problem
}

// jsonAny reads an AnyValue object at nesting depth into the arena.
func (d *Decoder) jsonAny(j *js, depth int) (int32, string) {
	if depth > d.opt.MaxDepth {
		j.skip()
		return -1, fmt.Sprintf("value nested deeper than %d", d.opt.MaxDepth)
	}
	idx := int32(-1)
	problem := ""
	note := func(prob string) {
		if problem == "" {
			problem = prob
		}
	}
	for ok := j.object(); ok; ok = j.more('}') {
		switch string(j.key()) {
		case "stringValue", "string_value":
			s := d.stable(j.str())
			if len(s) > d.opt.MaxStringLen {
				note(fmt.Sprintf("string_value of %d bytes, limit %d", len(s), d.opt.MaxStringLen))
			}
			idx = d.newNode(nString)
			d.nodes[idx].str = s
		case "boolValue", "bool_value":
			b := j.boolean("bool_value")
			idx = d.newNode(nBool)
			if b {
				d.nodes[idx].num = 1
			}
		case "intValue", "int_value":
			v := j.int("int_value", 64)
			idx = d.newNode(nInt)
			d.nodes[idx].num = uint64(v)
		case "doubleValue", "double_value":
			v := j.float("double_value")
			idx = d.newNode(nDouble)
			d.nodes[idx].num = math.Float64bits(v)
		case "bytesValue", "bytes_value":
			j.ws()
			at := j.pos
			s := j.str()
			start := len(d.strs)
			var err error
			d.strs, err = appendBase64(d.strs, s)
			if err != nil && j.err == nil {
				j.pos = at
				j.fail("bytes_value: %v", err)
			}
			b := d.strs[start:len(d.strs):len(d.strs)]
			if len(b) > d.opt.MaxStringLen {
				note(fmt.Sprintf("bytes_value of %d bytes, limit %d", len(b), d.opt.MaxStringLen))
			}
			idx = d.newNode(nBytes)
			d.nodes[idx].str = b
		case "arrayValue", "array_value":
			arr := d.newNode(nArray)
			for ok := j.object(); ok; ok = j.more('}') {
				if string(j.key()) != "values" {
					j.skip()
					continue
				}
				for ok := j.array(); ok; ok = j.more(']') {
					v, prob := d.jsonAny(j, depth+1)
					if prob != "" {
						note(prob)
					}
					if v < 0 {
						v = d.newNode(nEmpty)
					}
					d.addChild(arr, v)
				}
			}
			idx = arr
		case "kvlistValue", "kvlist_value":
			list := d.newNode(nList)
			for ok := j.object(); ok; ok = j.more('}') {
				if string(j.key()) != "values" {
					j.skip()
					continue
				}
				for ok := j.array(); ok; ok = j.more(']') {
					key, v, prob := d.jsonKV(j, depth+1)
					if prob != "" {
						note(prob)
					}
					d.member(list, key, v)
				}
			}
			idx = list
		default:
			j.skip()
		}
	}
	return idx, problem
}

// appendBase64 decodes standard base64 (padded or not; the URL-safe
// alphabet too, which proto3's JSON allows) and appends the bytes.
func appendBase64(dst, s []byte) ([]byte, error) {
	enc := base64.StdEncoding
	for _, c := range s {
		if c == '-' || c == '_' {
			enc = base64.URLEncoding
			break
		}
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc.AppendDecode(dst, s)
}
