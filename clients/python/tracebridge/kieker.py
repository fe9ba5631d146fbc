"""Kieker's binary record encoding as Kieker's single-socket TCP protocol
sends it (``SingleSocketTcpWriter``, default port 10133).

A connection is a stream of record frames with string-registry entries
interleaved, each entry before the first frame that uses its string::

    registry entry   int32 -1 | int32 id | int32 byte length | UTF-8 bytes
    record frame     int32 classNameId | int64 loggingTimestamp | fields

big-endian; a string field is the int32 id of a registry entry. Ids start at
0 per connection and are given in order of first use: the class name first,
then the string fields in field order (as Kieker 2.0 and tracebridge's Go
encoder do), so the same records give the same bytes.

A Registry belongs to one connection: start a new one after reconnecting.
Nothing here is thread-safe; the writer thread owns its registry and buffer.
"""

import struct

NO_TIMESTAMP = -1
"""The logging timestamp of a record that has none (Kieker's default)."""

MAX_STRING = 65536
"""Longest string sent, in UTF-8 bytes; longer ones are cut (at a character
boundary). The bridge's own limit is larger."""

_PREFIX = 'kieker.common.record.flow.trace.'
TRACE_METADATA = _PREFIX + 'TraceMetadata'
BEFORE_OPERATION_EVENT = _PREFIX + 'operation.BeforeOperationEvent'
AFTER_OPERATION_EVENT = _PREFIX + 'operation.AfterOperationEvent'
AFTER_OPERATION_FAILED_EVENT = _PREFIX + 'operation.AfterOperationFailedEvent'
SPLIT_EVENT = _PREFIX + 'concurrency.SplitEvent'
JOIN_EVENT = _PREFIX + 'concurrency.JoinEvent'
INVOCATION_RECORD = 'tracebridge.trace.InvocationRecord'
"""tracebridge's invocation identifier (internal/trace/invocation.go): a
record of the bridge's catalogue, sent like Kieker's."""

# Record kinds of the tuples the probes queue (first element of each tuple):
#   (META, creation_ns, traceId, threadId, sessionId, hostname, parentTraceId, parentOrderId)
#   (BEFORE | AFTER, timestamp, traceId, orderIndex, operationSignature, classSignature)
#   (FAILED, timestamp, traceId, orderIndex, operationSignature, classSignature, cause)
#   (SPLIT, timestamp, traceId, orderIndex)
#   (JOIN, timestamp, traceId, orderIndex, joinedTraceId)
#   (INV, creationTime, invocationId, processId, nodeId, runnableId,
#    parentInvocationId, parentProcessId, parentNodeId, parentOrderId, traceId)
META, BEFORE, AFTER, FAILED, SPLIT, JOIN, INV = 0, 1, 2, 3, 4, 5, 6

_CLASS = {META: TRACE_METADATA, BEFORE: BEFORE_OPERATION_EVENT,
          AFTER: AFTER_OPERATION_EVENT, FAILED: AFTER_OPERATION_FAILED_EVENT,
          SPLIT: SPLIT_EVENT, JOIN: JOIN_EVENT, INV: INVOCATION_RECORD}

_ENTRY = struct.Struct('>iii')
# classId, loggingTimestamp, timestamp, traceId, orderIndex, op, cls [, cause]
_EVENT = struct.Struct('>iqqqiii')
_FAILED = struct.Struct('>iqqqiiii')
# classId, loggingTimestamp, traceId, threadId, sessionId, hostname, parentTraceId, parentOrderId
_META = struct.Struct('>iqqqiiqi')
# classId, loggingTimestamp, timestamp, traceId, orderIndex [, joinedTraceId]
_SPLIT = struct.Struct('>iqqqi')
_JOIN = struct.Struct('>iqqqiq')
# classId, loggingTimestamp, invocationId, processId, nodeId, runnableId,
# creationTime, parentInvocationId, parentProcessId, parentNodeId,
# parentOrderId, traceId
_INV = struct.Struct('>iqqiiqqqiiiq')


def utf8(s):
    """The UTF-8 bytes sent for s: None is the empty string, other non-str
    values are str()-ed, lone surrogates are written as backslash escapes,
    and the result is cut to MAX_STRING bytes."""
    if s is None:
        return b''
    if not isinstance(s, str):
        s = str(s)
    b = s.encode('utf-8', 'backslashreplace')
    if len(b) > MAX_STRING:
        b = b[:MAX_STRING].decode('utf-8', 'ignore').encode('utf-8')
    return b


class Registry(object):
    """The string registry of one connection: ids from 0 in order of first
    use. Not thread-safe."""

    __slots__ = ('ids',)

    def __init__(self):
        self.ids = {}

    def __len__(self):
        return len(self.ids)

    def id(self, buf, s):
        """Returns the id of s, appending its registry entry to buf (a
        bytearray) when s is new."""
        i = self.ids.get(s)
        if i is None:
            i = self.add(buf, s)
        return i

    def add(self, buf, s):
        """Registers s (which must be new), appends its entry, returns its id."""
        b = utf8(s)
        i = len(self.ids)
        self.ids[s] = i
        buf += _ENTRY.pack(-1, i, len(b))
        buf += b
        return i


def _wrap64(v):
    v = int(v) & 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= 1 << 63 else v


def _wrap32(v):
    v = int(v) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def append_trace_metadata(buf, reg, trace_id, thread_id, session_id, hostname,
                          parent_trace_id, parent_order_id,
                          logging_timestamp=NO_TIMESTAMP):
    """Appends a TraceMetadata frame (and the registry entries it needs) to
    buf. Raises TypeError or ValueError for values that cannot be encoded."""
    _append(buf, (META, logging_timestamp, trace_id, thread_id, session_id, hostname,
                  parent_trace_id, parent_order_id), reg.ids.get, reg.add, True)


def append_operation_event(buf, reg, kind, timestamp, trace_id, order_index,
                           operation, cls, cause=None,
                           logging_timestamp=NO_TIMESTAMP):
    """Appends a BeforeOperationEvent (kind BEFORE), AfterOperationEvent
    (AFTER) or AfterOperationFailedEvent (FAILED, with cause) frame and the
    registry entries it needs. logging_timestamp is the frame header's
    timestamp. Raises TypeError or ValueError for values that cannot be
    encoded."""
    if kind not in (BEFORE, AFTER, FAILED):
        raise ValueError('not an operation event kind: %r' % (kind,))
    it = (kind, timestamp, trace_id, order_index, operation, cls)
    if kind == FAILED:
        it += (cause,)
    if logging_timestamp == NO_TIMESTAMP:
        _append(buf, it, reg.ids.get, reg.add, False)
        return
    start = len(buf)
    _append(buf, it, reg.ids.get, reg.add, False)
    # Patch the header timestamp of the frame (after any new entries).
    pos = start
    while struct.unpack_from('>i', buf, pos)[0] == -1:
        pos += 12 + struct.unpack_from('>i', buf, pos + 8)[0]
    struct.pack_into('>q', buf, pos + 4, _wrap64(logging_timestamp))


def append_concurrency_event(buf, reg, kind, timestamp, trace_id, order_index,
                             joined_trace_id=None, logging_timestamp=NO_TIMESTAMP):
    """Appends a SplitEvent (kind SPLIT) or JoinEvent (JOIN, naming
    joined_trace_id) frame and the registry entry of its class name.
    Raises TypeError or ValueError for values that cannot be encoded."""
    if kind == SPLIT:
        it = (SPLIT, timestamp, trace_id, order_index)
    elif kind == JOIN:
        it = (JOIN, timestamp, trace_id, order_index, joined_trace_id)
    else:
        raise ValueError('not a concurrency event kind: %r' % (kind,))
    if logging_timestamp == NO_TIMESTAMP:
        _append(buf, it, reg.ids.get, reg.add, False)
        return
    start = len(buf)
    _append(buf, it, reg.ids.get, reg.add, False)
    pos = start
    while struct.unpack_from('>i', buf, pos)[0] == -1:
        pos += 12 + struct.unpack_from('>i', buf, pos + 8)[0]
    struct.pack_into('>q', buf, pos + 4, _wrap64(logging_timestamp))


def append_invocation_record(buf, reg, creation_time, invocation_id, process_id, node_id,
                             runnable_id, parent_invocation_id, parent_process_id,
                             parent_node_id, parent_order_id, trace_id,
                             logging_timestamp=NO_TIMESTAMP):
    """Appends an InvocationRecord frame (tracebridge.trace.InvocationRecord)
    and the registry entries it needs: class name, nodeId, parentNodeId.
    logging_timestamp is the frame header's timestamp. Raises TypeError or
    ValueError for values that cannot be encoded."""
    it = (INV, creation_time, invocation_id, process_id, node_id, runnable_id,
          parent_invocation_id, parent_process_id, parent_node_id, parent_order_id, trace_id)
    start = len(buf)
    _append(buf, it, reg.ids.get, reg.add, False)
    if logging_timestamp != NO_TIMESTAMP:
        pos = start
        while struct.unpack_from('>i', buf, pos)[0] == -1:
            pos += 12 + struct.unpack_from('>i', buf, pos + 8)[0]
        struct.pack_into('>q', buf, pos + 4, _wrap64(logging_timestamp))


def append_records(buf, reg, items, logging_timestamps=False):
    """Appends the frames of queued record tuples (see META … JOIN) to buf,
    each preceded by the registry entries of its new strings, and returns
    the number of records appended. With logging_timestamps the frame header
    carries the record's own time (the event timestamp, or the creation time
    of a TraceMetadata or InvocationRecord); otherwise NO_TIMESTAMP. Integers out of their
    field's range wrap as in Java. A malformed tuple is skipped (not
    counted in the result); the registry entries it added stay valid."""
    ids = reg.ids
    get = ids.get
    add = reg.add
    pack_event = _EVENT.pack
    n = 0
    cb = ca = None
    for it in items:
        try:
            k = it[0]
        except (TypeError, IndexError, KeyError):
            continue  # not a record tuple
        # The common case inline: a Before or After event of known strings.
        if (k == BEFORE or k == AFTER) and not logging_timestamps:
            if k == BEFORE:
                c = cb
                if c is None:
                    c = cb = get(BEFORE_OPERATION_EVENT)
                    if c is None:
                        c = cb = add(buf, BEFORE_OPERATION_EVENT)
            else:
                c = ca
                if c is None:
                    c = ca = get(AFTER_OPERATION_EVENT)
                    if c is None:
                        c = ca = add(buf, AFTER_OPERATION_EVENT)
            try:
                o = get(it[4])
                if o is None:
                    o = add(buf, it[4])
                s = get(it[5])
                if s is None:
                    s = add(buf, it[5])
                buf += pack_event(c, -1, it[1], it[2], it[3], o, s)
                n += 1
                continue
            except (TypeError, IndexError, struct.error):
                pass  # the general path below wraps, or skips the tuple
        try:
            _append(buf, it, get, add, logging_timestamps)
        except (TypeError, ValueError, IndexError, KeyError, OverflowError, struct.error):
            continue  # a malformed tuple: skipped, the caller counts it
        n += 1
    return n


def _append(buf, it, get, add, logging_timestamps):
    k = it[0]
    if k == BEFORE or k == AFTER or k == FAILED:
        cname = _CLASS[k]
        c = get(cname)
        if c is None:
            c = add(buf, cname)
        o = get(it[4])
        if o is None:
            o = add(buf, it[4])
        s = get(it[5])
        if s is None:
            s = add(buf, it[5])
        lts = it[1] if logging_timestamps else NO_TIMESTAMP
        if k == FAILED:
            e = get(it[6])
            if e is None:
                e = add(buf, it[6])
            try:
                buf += _FAILED.pack(c, lts, it[1], it[2], it[3], o, s, e)
            except struct.error:
                buf += _FAILED.pack(c, _wrap64(lts), _wrap64(it[1]), _wrap64(it[2]),
                                    _wrap32(it[3]), o, s, e)
        else:
            try:
                buf += _EVENT.pack(c, lts, it[1], it[2], it[3], o, s)
            except struct.error:
                buf += _EVENT.pack(c, _wrap64(lts), _wrap64(it[1]), _wrap64(it[2]),
                                   _wrap32(it[3]), o, s)
    elif k == META:
        c = get(TRACE_METADATA)
        if c is None:
            c = add(buf, TRACE_METADATA)
        ses = get(it[4])
        if ses is None:
            ses = add(buf, it[4])
        host = get(it[5])
        if host is None:
            host = add(buf, it[5])
        lts = it[1] if logging_timestamps else NO_TIMESTAMP
        try:
            buf += _META.pack(c, lts, it[2], it[3], ses, host, it[6], it[7])
        except struct.error:
            buf += _META.pack(c, _wrap64(lts), _wrap64(it[2]), _wrap64(it[3]), ses, host,
                              _wrap64(it[6]), _wrap32(it[7]))
    elif k == SPLIT or k == JOIN:
        cname = _CLASS[k]
        c = get(cname)
        if c is None:
            c = add(buf, cname)
        lts = it[1] if logging_timestamps else NO_TIMESTAMP
        try:
            if k == SPLIT:
                buf += _SPLIT.pack(c, lts, it[1], it[2], it[3])
            else:
                buf += _JOIN.pack(c, lts, it[1], it[2], it[3], it[4])
        except struct.error:
            if k == SPLIT:
                buf += _SPLIT.pack(c, _wrap64(lts), _wrap64(it[1]), _wrap64(it[2]), _wrap32(it[3]))
            else:
                buf += _JOIN.pack(c, _wrap64(lts), _wrap64(it[1]), _wrap64(it[2]), _wrap32(it[3]),
                                  _wrap64(it[4]))
    elif k == INV:
        c = get(INVOCATION_RECORD)
        if c is None:
            c = add(buf, INVOCATION_RECORD)
        node = get(it[4])
        if node is None:
            node = add(buf, it[4])
        pnode = get(it[8])
        if pnode is None:
            pnode = add(buf, it[8])
        lts = it[1] if logging_timestamps else NO_TIMESTAMP
        try:
            buf += _INV.pack(c, lts, it[2], it[3], node, it[5], it[1], it[6], it[7], pnode, it[9], it[10])
        except struct.error:
            buf += _INV.pack(c, _wrap64(lts), _wrap64(it[2]), _wrap32(it[3]), node, _wrap64(it[5]),
                             _wrap64(it[1]), _wrap64(it[6]), _wrap32(it[7]), pnode, _wrap32(it[9]),
                             _wrap64(it[10]))
    else:
        raise ValueError('unknown record kind %r' % (k,))
