package otlp

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// pb reads the fields of one protobuf message in place. The first error
// sticks: next returns false from then on and err says where and why.
type pb struct {
	buf  []byte
	pos  int
	base int // offset of buf[0] in the whole message

	// The field next read.
	num    uint64
	wt     uint8
	at     int    // offset of its tag
	u      uint64 // varint, fixed64 or fixed32 value
	data   []byte // length-delimited value
	dataAt int    // offset of data

	err *Error
}

func newPB(buf []byte, base int) pb { return pb{buf: buf, base: base} }

// sub returns a reader of the current length-delimited field.
func (p *pb) sub() pb { return pb{buf: p.data, base: p.dataAt} }

func (p *pb) fail(off int, format string, args ...any) {
	if p.err == nil {
		p.err = malformed(off, format, args...)
	}
}

// next reads the next field; false at the end of the message or on error.
func (p *pb) next() bool {
	if p.err != nil || p.pos >= len(p.buf) {
		return false
	}
	p.at = p.base + p.pos
	tag, ok := p.varint()
	if !ok {
		return false
	}
	p.num, p.wt = tag>>3, uint8(tag&7)
	if p.num == 0 {
		p.fail(p.at, "field number 0")
		return false
	}
	switch p.wt {
	case wireVarint:
		p.u, ok = p.varint()
		return ok
	case wireFixed64:
		if len(p.buf)-p.pos < 8 {
			p.fail(p.base+p.pos, "field %d: fixed64 truncated (%d bytes left)", p.num, len(p.buf)-p.pos)
			return false
		}
		p.u = binary.LittleEndian.Uint64(p.buf[p.pos:])
		p.pos += 8
		return true
	case wireFixed32:
		if len(p.buf)-p.pos < 4 {
			p.fail(p.base+p.pos, "field %d: fixed32 truncated (%d bytes left)", p.num, len(p.buf)-p.pos)
			return false
		}
		p.u = uint64(binary.LittleEndian.Uint32(p.buf[p.pos:]))
		p.pos += 4
		return true
	case wireBytes:
		lenAt := p.base + p.pos
		n, ok := p.varint()
		if !ok {
			return false
		}
		if n > uint64(len(p.buf)-p.pos) {
			p.fail(lenAt, "field %d: length %d exceeds the %d bytes left", p.num, n, len(p.buf)-p.pos)
			return false
		}
		p.dataAt = p.base + p.pos
		p.data = p.buf[p.pos : p.pos+int(n)]
		p.pos += int(n)
		return true
	}
	p.fail(p.at, "field %d: wire type %d (groups and unknown wire types are not supported)", p.num, p.wt)
	return false
}

// varint reads a base-128 varint. Like protobuf's own readers it takes
// ten bytes at most, ignoring bits beyond 64.
func (p *pb) varint() (uint64, bool) {
	if p.pos < len(p.buf) && p.buf[p.pos] < 0x80 {
		v := p.buf[p.pos]
		p.pos++
		return uint64(v), true
	}
	start := p.pos
	var v uint64
	for shift := uint(0); shift < 70; shift += 7 {
		if p.pos >= len(p.buf) {
			p.fail(p.base+start, "varint truncated")
			return 0, false
		}
		c := p.buf[p.pos]
		p.pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, true
		}
	}
	p.fail(p.base+start, "varint longer than 10 bytes")
	return 0, false
}

// want checks the current field's wire type.
func (p *pb) want(wt uint8, name string) bool {
	if p.wt != wt {
		p.fail(p.at, "field %d (%s): wire type %d, want %d", p.num, name, p.wt, wt)
		return false
	}
	return true
}

// DecodeProto decodes an ExportTraceServiceRequest in protobuf into span
// records appended to b; once b holds Options.MaxBatch records the
// decoder goes on in a batch from next (nil: everything goes into b).
// A malformed message is an *Error and leaves the batches as they were.
func (d *Decoder) DecodeProto(msg []byte, b *record.Batch, next func() *record.Batch) (Result, error) {
	d.start(b, next)
	if len(msg) > d.opt.MaxMessageSize {
		return d.finish(&Error{Offset: d.opt.MaxMessageSize, Reason: fmt.Sprintf("message of %d bytes exceeds the limit of %d", len(msg), d.opt.MaxMessageSize), Err: ErrTooLarge})
	}
	return d.finish(d.request(msg))
}

func (d *Decoder) request(msg []byte) error {
	p := newPB(msg, 0)
	for p.next() {
		if p.num != 1 {
			continue // unknown fields are skipped
		}
		if !p.want(wireBytes, "resource_spans") {
			break
		}
		if err := d.resourceSpans(p.sub()); err != nil {
			return err
		}
	}
	return p.errOrNil()
}

// errOrNil returns the reader's error as an error interface value (nil
// when there is none, not a typed nil).
func (p *pb) errOrNil() error {
	if p.err == nil {
		return nil
	}
	return p.err
}

// resourceSpans reads one ResourceSpans: its resource first (wherever it
// is), then its scopes.
func (d *Decoder) resourceSpans(rs pb) error {
	d.res.reset()
	nattrs, scopes := 0, 0
	p := rs
	for p.next() {
		switch p.num {
		case 1: // resource (repeated occurrences merge)
			if !p.want(wireBytes, "resource") {
				break
			}
			if err := d.resource(p.sub(), &nattrs); err != nil {
				return err
			}
		case 2:
			if p.want(wireBytes, "scope_spans") {
				scopes++
			}
		case 3:
			p.want(wireBytes, "schema_url")
		case fieldDeprecatedScopeSpans:
			p.want(wireBytes, "instrumentation_library_spans")
		}
	}
	if p.err != nil {
		return p.err
	}
	// Senders of OTLP before 0.15 put their scopes in field 1000
	// (instrumentation_library_spans); they count when there are no
	// others, as pdata has it.
	field := uint64(2)
	if scopes == 0 {
		field = fieldDeprecatedScopeSpans
	}
	p = rs
	for p.next() {
		if p.num == field {
			if err := d.scopeSpans(p.sub()); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldDeprecatedScopeSpans is ResourceSpans' field of OTLP before 0.15.
const fieldDeprecatedScopeSpans = 1000

func (d *Decoder) resource(p pb, nattrs *int) error {
	for p.next() {
		switch p.num {
		case 1:
			if !p.want(wireBytes, "resource attribute") {
				break
			}
			d.resetNodes()
			key, val, problem, err := d.kv(p.sub(), 1)
			if err != nil {
				return err
			}
			*nattrs++
			switch {
			case problem != "":
				d.res.rejectf(p.at, "attribute: %s", problem)
			case *nattrs > d.opt.MaxAttributes:
				d.res.rejectf(p.at, "more than %d attributes", d.opt.MaxAttributes)
			case d.res.reject == "":
				v, t, _ := d.text(val)
				d.addResourceAttr(attr{d.str(key), v, t})
			}
		case 2:
			p.want(wireVarint, "dropped_attributes_count")
		case 3:
			p.want(wireBytes, "entity_refs")
		}
	}
	return p.errOrNil()
}

// scopeSpans reads one ScopeSpans: its scope first, then its spans.
func (d *Decoder) scopeSpans(ss pb) error {
	d.resetScope()
	scopeReject := ""
	p := ss
	for p.next() {
		switch p.num {
		case 1:
			if !p.want(wireBytes, "scope") {
				break
			}
			if err := d.scopeOf(p.sub(), &scopeReject); err != nil {
				return err
			}
		case 2:
			p.want(wireBytes, "spans")
		case 3:
			p.want(wireBytes, "schema_url")
		}
	}
	if p.err != nil {
		return p.err
	}
	p = ss
	for p.next() {
		if p.num != 2 {
			continue
		}
		if err := d.span(p.sub()); err != nil {
			return err
		}
		if scopeReject != "" {
			d.sp.rejectf("%s", scopeReject)
		}
		d.addSpan()
	}
	return nil
}

// scopeOf reads an InstrumentationScope: its name, version and
// attributes.
func (d *Decoder) scopeOf(p pb, reject *string) error {
	for p.next() {
		switch p.num {
		case 1:
			if !p.want(wireBytes, "scope name") {
				break
			}
			if len(p.data) > d.opt.MaxStringLen {
				if *reject == "" {
					*reject = fmt.Sprintf("scope name at offset %d: %d bytes, limit %d", p.at, len(p.data), d.opt.MaxStringLen)
				}
				break
			}
			d.scope = d.str(p.data)
		case 2:
			if p.want(wireBytes, "scope version") {
				d.setScopeVersion(p.at, p.data, reject)
			}
		case 3:
			if !p.want(wireBytes, "scope attribute") {
				break
			}
			d.resetNodes()
			key, val, problem, err := d.kv(p.sub(), 1)
			if err != nil {
				return err
			}
			d.addScopeAttr(p.at, key, val, problem, reject)
		case 4:
			p.want(wireVarint, "dropped_attributes_count")
		}
	}
	return p.errOrNil()
}

// span reads a Span into d.sp.
func (d *Decoder) span(p pb) error {
	s := &d.sp
	s.reset(p.base)
	for p.next() {
		switch p.num {
		case 1:
			if p.want(wireBytes, "trace_id") {
				switch len(p.data) {
				case 0:
					s.traceHi, s.traceLo = 0, 0
				case 16:
					s.traceHi, s.traceLo = beUint64(p.data), beUint64(p.data[8:])
				default:
					s.rejectf("trace id of %d bytes, want 16", len(p.data))
				}
			}
		case 2:
			if p.want(wireBytes, "span_id") {
				s.id = d.spanID(p.data, "span id")
			}
		case 3:
			if p.want(wireBytes, "trace_state") {
				s.traceState = d.spanString(p.data, "trace state")
			}
		case 4:
			if p.want(wireBytes, "parent_span_id") {
				s.parent = d.spanID(p.data, "parent span id")
			}
		case 5:
			if p.want(wireBytes, "name") {
				s.name = d.spanString(p.data, "name")
			}
		case 6:
			if p.want(wireVarint, "kind") {
				s.kind = uint64(uint32(p.u)) // an enum is an int32
			}
		case 7:
			if p.want(wireFixed64, "start_time_unix_nano") {
				s.start = p.u
			}
		case 8:
			if p.want(wireFixed64, "end_time_unix_nano") {
				s.end = p.u
			}
		case 9:
			if !p.want(wireBytes, "attribute") {
				break
			}
			a, h, ok := d.attrs.get(p.data)
			if ok { // well-formed and within the limits when it was read
				if len(s.attrs) >= d.opt.MaxAttributes {
					s.rejectf("more than %d attributes", d.opt.MaxAttributes)
				} else if s.reject == "" {
					s.attrs = append(s.attrs, a)
				}
				break
			}
			d.resetNodes()
			key, val, problem, err := d.kv(p.sub(), 1)
			if err != nil {
				return err
			}
			switch {
			case problem != "":
				s.rejectf("attribute at offset %d: %s", p.at, problem)
			case len(s.attrs) >= d.opt.MaxAttributes:
				s.rejectf("more than %d attributes", d.opt.MaxAttributes)
			case s.reject == "":
				v, t, seen := d.text(val)
				k, kseen := d.intern(key)
				a := attr{k, v, t}
				if seen && kseen {
					d.attrs.put(p.data, h, a)
				}
				s.attrs = append(s.attrs, a)
			}
		case 11:
			if !p.want(wireBytes, "event") {
				break
			}
			if err := d.event(p.sub()); err != nil {
				return err
			}
		case 13:
			if !p.want(wireBytes, "link") {
				break
			}
			if err := d.link(p.sub()); err != nil {
				return err
			}
		case 15:
			if !p.want(wireBytes, "status") {
				break
			}
			if err := d.status(p.sub()); err != nil {
				return err
			}
		case 16:
			if p.want(wireFixed32, "flags") {
				s.flags = uint32(p.u)
			}
		case 10, 12, 14:
			p.want(wireVarint, "dropped count")
		}
	}
	return p.errOrNil()
}

// spanID reads an 8-byte span id (0 when empty); another length rejects
// the span.
func (d *Decoder) spanID(b []byte, what string) uint64 {
	switch len(b) {
	case 0:
		return 0
	case 8:
		return beUint64(b)
	}
	d.sp.rejectf("%s of %d bytes, want 8", what, len(b))
	return 0
}

// spanString interns a string of the span, rejecting the span when it
// is too long.
func (d *Decoder) spanString(b []byte, what string) string {
	if len(b) > d.opt.MaxStringLen {
		d.sp.rejectf("%s of %d bytes, limit %d", what, len(b), d.opt.MaxStringLen)
		return ""
	}
	return d.str(b)
}

func (d *Decoder) status(p pb) error {
	s := &d.sp
	for p.next() {
		switch p.num {
		case 2:
			if p.want(wireBytes, "status message") {
				s.statusMsg = d.spanString(p.data, "status message")
			}
		case 3:
			if p.want(wireVarint, "status code") {
				s.status = uint64(uint32(p.u))
			}
		}
	}
	return p.errOrNil()
}

// event reads a span event into the span's events: name, time, and its
// attributes as a JSON object.
func (d *Decoder) event(p pb) error {
	at := p.base
	var name []byte
	var t uint64
	attrs := d.newAttrObject()
	for p.next() {
		switch p.num {
		case 1:
			if p.want(wireFixed64, "event time") {
				t = p.u
			}
		case 2:
			if p.want(wireBytes, "event name") {
				name = p.data
			}
		case 3:
			if !p.want(wireBytes, "event attribute") {
				break
			}
			if err := d.protoAttr(p, &attrs); err != nil {
				return err
			}
		case 4:
			p.want(wireVarint, "dropped_attributes_count")
		}
	}
	if p.err != nil {
		return p.err
	}
	d.addEvent(at, name, t, &attrs)
	return nil
}

// addEvent checks an event read at offset at (protobuf or JSON) against
// the limits and adds it to the span's events: name, time and its
// attributes as a JSON object.
func (d *Decoder) addEvent(at int, name []byte, t uint64, attrs *attrObject) {
	problem, n, root := attrs.problem, attrs.n, attrs.root
	s := &d.sp
	s.nEvents++
	switch {
	case problem != "":
		s.rejectf("event at offset %d: %s", at, problem)
	case n > d.opt.MaxAttributes:
		s.rejectf("event at offset %d: more than %d attributes", at, d.opt.MaxAttributes)
	case len(name) > d.opt.MaxStringLen:
		s.rejectf("event at offset %d: name of %d bytes, limit %d", at, len(name), d.opt.MaxStringLen)
	case s.nEvents > d.opt.MaxEvents:
		s.rejectf("more than %d events", d.opt.MaxEvents)
	case s.reject == "":
		d.buf = strconv.AppendInt(d.buf[:0], int64(t), 10) // as the record's times: int64
		when := string(d.buf)
		s.events = append(s.events, d.str(name), when, d.objectText(root))
	}
}

// attrObject gathers the attributes of an event or a link into list node
// root, a JSON object: how many, and the first thing wrong with them.
type attrObject struct {
	root    int32
	n       int
	problem string
}

// newAttrObject resets the nodes and starts an empty attribute object.
func (d *Decoder) newAttrObject() attrObject {
	d.resetNodes()
	return attrObject{root: d.newNode(nList)}
}

// addAttr makes val a member named key of attrs; prob is what is wrong
// with it, if anything.
func (d *Decoder) addAttr(attrs *attrObject, key []byte, val int32, prob string) {
	if prob != "" && attrs.problem == "" {
		attrs.problem = prob
	}
	d.member(attrs.root, key, val)
	attrs.n++
}

// protoAttr reads the KeyValue p holds into attrs.
func (d *Decoder) protoAttr(p pb, attrs *attrObject) error {
	key, val, prob, err := d.kv(p.sub(), 1)
	if err != nil {
		return err
	}
	d.addAttr(attrs, key, val, prob)
	return nil
}

// member makes val a member named key of list node root.
func (d *Decoder) member(root int32, key []byte, val int32) {
	if val < 0 {
		val = d.newNode(nEmpty)
	}
	d.nodes[val].key = key
	d.addChild(root, val)
}

// objectText returns list node root as a JSON object ("{}" when empty).
func (d *Decoder) objectText(root int32) string {
	if d.nodes[root].first < 0 {
		return "{}"
	}
	d.buf = d.appendObject(d.buf[:0], root)
	return d.str(d.buf)
}

// link reads a span link into the span's links: trace id, span id (hex),
// trace state, attributes as a JSON object.
func (d *Decoder) link(p pb) error {
	at := p.base
	var tid, sid, state []byte
	attrs := d.newAttrObject()
	for p.next() {
		switch p.num {
		case 1:
			if p.want(wireBytes, "link trace_id") {
				tid = p.data
			}
		case 2:
			if p.want(wireBytes, "link span_id") {
				sid = p.data
			}
		case 3:
			if p.want(wireBytes, "link trace_state") {
				state = p.data
			}
		case 4:
			if !p.want(wireBytes, "link attribute") {
				break
			}
			if err := d.protoAttr(p, &attrs); err != nil {
				return err
			}
		case 5:
			p.want(wireVarint, "dropped_attributes_count")
		case 6:
			p.want(wireFixed32, "link flags")
		}
	}
	if p.err != nil {
		return p.err
	}
	idProblem := ""
	switch {
	case len(tid) != 0 && len(tid) != 16:
		idProblem = fmt.Sprintf("trace id of %d bytes, want 16", len(tid))
	case len(sid) != 0 && len(sid) != 8:
		idProblem = fmt.Sprintf("span id of %d bytes, want 8", len(sid))
	}
	if len(state) > d.opt.MaxStringLen && attrs.problem == "" {
		attrs.problem = fmt.Sprintf("trace state of %d bytes, limit %d", len(state), d.opt.MaxStringLen)
	}
	var hi, lo, id uint64
	if len(tid) == 16 {
		hi, lo = beUint64(tid), beUint64(tid[8:])
	}
	if len(sid) == 8 {
		id = beUint64(sid)
	}
	d.addLink(at, idProblem, hi, lo, id, state, &attrs)
	return nil
}

// addLink checks a link read at offset at (protobuf or JSON) against the
// limits and adds it to the span's links: trace id, span id (hex), trace
// state and its attributes as a JSON object. idProblem is what is wrong
// with its ids; attrs.problem the first thing wrong with the rest.
func (d *Decoder) addLink(at int, idProblem string, hi, lo, id uint64, state []byte, attrs *attrObject) {
	problem, n, root := attrs.problem, attrs.n, attrs.root
	s := &d.sp
	s.nLinks++
	switch {
	case idProblem != "":
		s.rejectf("link at offset %d: %s", at, idProblem)
	case problem != "":
		s.rejectf("link at offset %d: %s", at, problem)
	case n > d.opt.MaxAttributes:
		s.rejectf("link at offset %d: more than %d attributes", at, d.opt.MaxAttributes)
	case s.nLinks > d.opt.MaxLinks:
		s.rejectf("more than %d links", d.opt.MaxLinks)
	case s.reject == "":
		d.buf = appendIDHex(d.buf[:0], hi, lo)
		t := d.str(d.buf)
		d.buf = appendIDHex(d.buf[:0], id)
		s.links = append(s.links, t, d.str(d.buf), d.str(state), d.objectText(root))
	}
}

// kv reads a KeyValue into the node arena: its key and the index of its
// value (-1 when it has none). A limit it breaks is a problem (the span
// is rejected), bad bytes an error.
func (d *Decoder) kv(p pb, depth int) (key []byte, val int32, problem string, err error) {
	val = -1
	for p.next() {
		switch p.num {
		case 1:
			if p.want(wireBytes, "key") {
				key = p.data
			}
		case 2:
			if !p.want(wireBytes, "value") {
				break
			}
			// Repeated occurrences merge: the last one that sets a
			// value wins.
			v, prob, err := d.anyValue(p.sub(), depth)
			if err != nil {
				return nil, -1, "", err
			}
			if prob != "" && problem == "" {
				problem = prob
			}
			if v >= 0 {
				val = v
			}
		}
	}
	if p.err != nil {
		return nil, -1, "", p.err
	}
	if len(key) > d.opt.MaxStringLen && problem == "" {
		problem = fmt.Sprintf("key of %d bytes, limit %d", len(key), d.opt.MaxStringLen)
	}
	if val < 0 {
		val = d.newNode(nEmpty)
	}
	return key, val, problem, nil
}

// anyValue reads an AnyValue at nesting depth into the arena and returns
// its node (-1 when the message sets no value).
func (d *Decoder) anyValue(p pb, depth int) (int32, string, error) {
	if depth > d.opt.MaxDepth {
		// Its bytes are delimited: skipped, not read.
		return -1, fmt.Sprintf("value nested deeper than %d", d.opt.MaxDepth), nil
	}
	idx := int32(-1)
	problem := ""
	note := func(prob string) {
		if problem == "" {
			problem = prob
		}
	}
	for p.next() {
		switch p.num {
		case 1, 7:
			what, kind := "string_value", nString
			if p.num == 7 {
				what, kind = "bytes_value", nBytes
			}
			if !p.want(wireBytes, what) {
				break
			}
			if len(p.data) > d.opt.MaxStringLen {
				note(fmt.Sprintf("%s of %d bytes, limit %d", what, len(p.data), d.opt.MaxStringLen))
			}
			idx = d.newNode(kind)
			d.nodes[idx].str = p.data
		case 2:
			if p.want(wireVarint, "bool_value") {
				idx = d.newNode(nBool)
				if p.u != 0 {
					d.nodes[idx].num = 1
				}
			}
		case 3:
			if p.want(wireVarint, "int_value") {
				idx = d.newNode(nInt)
				d.nodes[idx].num = p.u
			}
		case 4:
			if p.want(wireFixed64, "double_value") {
				idx = d.newNode(nDouble)
				d.nodes[idx].num = p.u
			}
		case 5:
			if !p.want(wireBytes, "array_value") {
				break
			}
			arr := d.newNode(nArray)
			q := p.sub()
			for q.next() {
				if q.num != 1 {
					continue
				}
				if !q.want(wireBytes, "array item") {
					break
				}
				v, prob, err := d.anyValue(q.sub(), depth+1)
				if err != nil {
					return -1, "", err
				}
				if prob != "" {
					note(prob)
				}
				if v < 0 {
					v = d.newNode(nEmpty)
				}
				d.addChild(arr, v)
			}
			if q.err != nil {
				return -1, "", q.err
			}
			idx = arr
		case 6:
			if !p.want(wireBytes, "kvlist_value") {
				break
			}
			list := d.newNode(nList)
			q := p.sub()
			for q.next() {
				if q.num != 1 {
					continue
				}
				if !q.want(wireBytes, "kvlist member") {
					break
				}
				key, v, prob, err := d.kv(q.sub(), depth+1)
				if err != nil {
					return -1, "", err
				}
				if prob != "" {
					note(prob)
				}
				d.member(list, key, v)
			}
			if q.err != nil {
				return -1, "", q.err
			}
			idx = list
		}
	}
	if p.err != nil {
		return -1, "", p.err
	}
	return idx, problem, nil
}
