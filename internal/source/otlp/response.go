package otlp

import (
	"strconv"

	"github.com/tracebridge/tracebridge/internal/jsonstr"
)

// appendResponse appends an ExportTraceServiceResponse in protobuf: empty
// on full success, else partial_success (1) { rejected_spans (1),
// error_message (2) }.
func appendResponse(dst []byte, o outcome) []byte {
	if o.rejected == 0 {
		return dst
	}
	var ps []byte
	ps = appendTag(ps, 1, 0)
	ps = appendVarint(ps, uint64(o.rejected))
	if o.reason != "" {
		ps = appendTag(ps, 2, 2)
		ps = appendVarint(ps, uint64(len(o.reason)))
		ps = append(ps, o.reason...)
	}
	dst = appendTag(dst, 1, 2)
	dst = appendVarint(dst, uint64(len(ps)))
	return append(dst, ps...)
}

// appendResponseJSON appends the response in OTLP/JSON.
func appendResponseJSON(dst []byte, o outcome) []byte {
	if o.rejected == 0 {
		return append(dst, "{}"...)
	}
	dst = append(dst, `{"partialSuccess":{"rejectedSpans":"`...)
	dst = strconv.AppendInt(dst, int64(o.rejected), 10)
	dst = append(dst, '"')
	if o.reason != "" {
		dst = append(dst, `,"errorMessage":`...)
		dst = jsonstr.AppendString(dst, o.reason)
	}
	return append(dst, "}}"...)
}

// appendStatus appends a google.rpc.Status { code (1), message (2) } in
// protobuf, the body of OTLP/HTTP's error responses.
func appendStatus(dst []byte, code int, msg string) []byte {
	dst = appendTag(dst, 1, 0)
	dst = appendVarint(dst, uint64(code))
	dst = appendTag(dst, 2, 2)
	dst = appendVarint(dst, uint64(len(msg)))
	return append(dst, msg...)
}

// appendStatusJSON appends the Status in JSON.
func appendStatusJSON(dst []byte, code int, msg string) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = jsonstr.AppendString(dst, msg)
	return append(dst, '}')
}

func appendTag(b []byte, num, wt int) []byte { return appendVarint(b, uint64(num<<3|wt)) }

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
