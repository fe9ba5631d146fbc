/*
 * encode.c — Kieker's binary record frames (FORMATS.md §2), big-endian,
 * written with shifts so the output is the same on any host byte order:
 *
 *   frame:  int32 classNameId | int64 loggingTimestamp | fields
 *   entry:  int32 -1 | int32 id | int32 byteLength | UTF-8 bytes
 *
 * Field layouts (internal/record/builtin.go):
 *   TraceMetadata:  long traceId, long threadId, String sessionId,
 *                   String hostname, long parentTraceId, int parentOrderId
 *   Before/AfterOperationEvent: long timestamp, long traceId,
 *                   int orderIndex, String operationSignature,
 *                   String classSignature
 *   AfterOperationFailedEvent: the five above, String cause
 *   SplitEvent:     long timestamp, long traceId, int orderIndex
 *   JoinEvent:      the three above, long joinedTraceId
 *   tracebridge.trace.InvocationRecord (internal/trace/invocation.go):
 *                   long invocationId, int processId, String nodeId,
 *                   long runnableId, long creationTime,
 *                   long parentInvocationId, int parentProcessId,
 *                   String parentNodeId, int parentOrderId, long traceId
 */
#include "internal.h"

#include <string.h>

size_t tb_frame_size(uint8_t kind)
{
	switch (kind) {
	case TB_KIND_META:
		return 4 + 8 + 8 + 8 + 4 + 4 + 8 + 4;
	case TB_KIND_BEFORE:
	case TB_KIND_AFTER:
		return 4 + 8 + 8 + 8 + 4 + 4 + 4;
	case TB_KIND_FAILED:
		return 4 + 8 + 8 + 8 + 4 + 4 + 4 + 4;
	case TB_KIND_SPLIT:
		return 4 + 8 + 8 + 8 + 4;
	case TB_KIND_JOIN:
		return 4 + 8 + 8 + 8 + 4 + 8;
	case TB_KIND_INV:
		return 4 + 8 + 8 + 4 + 4 + 8 + 8 + 8 + 4 + 4 + 4 + 8;
	}
	return 0;
}

int tb_rec_strings(const struct tb_rec *r, tb_str_t out[4])
{
	switch (r->kind) {
	case TB_KIND_META:
		out[0] = TB_STR_TRACE_META;
		out[1] = r->s1;
		out[2] = r->s2;
		return 3;
	case TB_KIND_BEFORE:
		out[0] = TB_STR_BEFORE;
		break;
	case TB_KIND_AFTER:
		out[0] = TB_STR_AFTER;
		break;
	case TB_KIND_FAILED:
		out[0] = TB_STR_AFTER_FAILED;
		out[1] = r->s1;
		out[2] = r->s2;
		out[3] = r->s3;
		return 4;
	case TB_KIND_SPLIT:
		out[0] = TB_STR_SPLIT;
		return 1;
	case TB_KIND_JOIN:
		out[0] = TB_STR_JOIN;
		return 1;
	case TB_KIND_INV:
		out[0] = TB_STR_INVOCATION;
		out[1] = r->s1;
		out[2] = r->s2;
		return 3;
	default:
		return 0;
	}
	out[1] = r->s1;
	out[2] = r->s2;
	return 3;
}

uint8_t *tb_append_frame(uint8_t *p, const struct tb_rec *r, int32_t cls, const int32_t ids[3])
{
	p = tb_put32(p, (uint32_t)cls);
	if (r->kind == TB_KIND_INV) {
		p = tb_put64(p, (r->flags & TB_REC_LTS) ? (uint64_t)r->time : UINT64_MAX);
		p = tb_put64(p, (uint64_t)r->lts);
		p = tb_put32(p, (uint32_t)tb_pid);
		p = tb_put32(p, (uint32_t)ids[0]);
		p = tb_put64(p, (uint64_t)(int64_t)r->aux);
		p = tb_put64(p, (uint64_t)r->time);
		p = tb_put64(p, (uint64_t)r->parent);
		p = tb_put32(p, (uint32_t)r->s3);
		p = tb_put32(p, (uint32_t)ids[1]);
		p = tb_put32(p, (uint32_t)r->order);
		return tb_put64(p, (uint64_t)r->trace);
	}
	p = tb_put64(p, (uint64_t)r->lts);
	if (r->kind == TB_KIND_META) {
		p = tb_put64(p, (uint64_t)r->trace);
		p = tb_put64(p, (uint64_t)r->time);
		p = tb_put32(p, (uint32_t)ids[0]);
		p = tb_put32(p, (uint32_t)ids[1]);
		p = tb_put64(p, (uint64_t)r->parent);
		return tb_put32(p, (uint32_t)r->order);
	}
	p = tb_put64(p, (uint64_t)r->time);
	p = tb_put64(p, (uint64_t)r->trace);
	p = tb_put32(p, (uint32_t)r->order);
	if (r->kind == TB_KIND_SPLIT)
		return p;
	if (r->kind == TB_KIND_JOIN)
		return tb_put64(p, (uint64_t)r->parent);
	p = tb_put32(p, (uint32_t)ids[0]);
	p = tb_put32(p, (uint32_t)ids[1]);
	if (r->kind == TB_KIND_FAILED)
		p = tb_put32(p, (uint32_t)ids[2]);
	return p;
}

uint8_t *tb_append_entry(uint8_t *p, int32_t id, const char *s, uint32_t len)
{
	p = tb_put32(p, 0xffffffffu);
	p = tb_put32(p, (uint32_t)id);
	p = tb_put32(p, len);
	memcpy(p, s, len);
	return p + len;
}
