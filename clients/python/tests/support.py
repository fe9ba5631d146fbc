"""Test helpers: a TCP server that keeps the bytes of each connection, and
an independent decoder of Kieker's single-socket stream (written from the
protocol description, not from tracebridge.kieker)."""

import socket
import struct
import threading
import time

LAYOUTS = {
    'kieker.common.record.flow.trace.TraceMetadata':
        ('traceId:q', 'threadId:q', 'sessionId:s', 'hostname:s', 'parentTraceId:q', 'parentOrderId:i'),
    'kieker.common.record.flow.trace.operation.BeforeOperationEvent':
        ('timestamp:q', 'traceId:q', 'orderIndex:i', 'operationSignature:s', 'classSignature:s'),
    'kieker.common.record.flow.trace.operation.AfterOperationEvent':
        ('timestamp:q', 'traceId:q', 'orderIndex:i', 'operationSignature:s', 'classSignature:s'),
    'kieker.common.record.flow.trace.operation.AfterOperationFailedEvent':
        ('timestamp:q', 'traceId:q', 'orderIndex:i', 'operationSignature:s', 'classSignature:s',
         'cause:s'),
    'kieker.common.record.flow.trace.concurrency.SplitEvent':
        ('timestamp:q', 'traceId:q', 'orderIndex:i'),
    'kieker.common.record.flow.trace.concurrency.JoinEvent':
        ('timestamp:q', 'traceId:q', 'orderIndex:i', 'joinedTraceId:q'),
    'tracebridge.trace.InvocationRecord':
        ('invocationId:q', 'processId:i', 'nodeId:s', 'runnableId:q', 'creationTime:q',
         'parentInvocationId:q', 'parentProcessId:i', 'parentNodeId:s', 'parentOrderId:i', 'traceId:q'),
}


class StreamError(Exception):
    pass


def decode(data, strict=True):
    """Decodes one connection's bytes into (records, registry). Each record
    is a dict with 'type' (short class name), 'lts' and its fields. A
    registry id must be new and consecutive from 0; every id used must be
    registered before. A truncated tail raises StreamError when strict."""
    reg = {}
    out = []
    pos = 0
    n = len(data)
    try:
        while pos < n:
            (head,) = struct.unpack_from('>i', data, pos)
            if head == -1:
                sid, ln = struct.unpack_from('>ii', data, pos + 4)
                if sid != len(reg):
                    raise StreamError('offset %d: registry id %d, want %d' % (pos, sid, len(reg)))
                if pos + 12 + ln > n:
                    raise struct.error('short entry')
                reg[sid] = data[pos + 12:pos + 12 + ln].decode('utf-8')
                pos += 12 + ln
                continue
            if head not in reg:
                raise StreamError('offset %d: unregistered class id %d' % (pos, head))
            cname = reg[head]
            layout = LAYOUTS[cname]
            (lts,) = struct.unpack_from('>q', data, pos + 4)
            p = pos + 12
            rec = {'type': cname.rsplit('.', 1)[1], 'lts': lts}
            for f in layout:
                name, kind = f.split(':')
                if kind == 'q':
                    (rec[name],) = struct.unpack_from('>q', data, p)
                    p += 8
                elif kind == 'i':
                    (rec[name],) = struct.unpack_from('>i', data, p)
                    p += 4
                else:
                    (sid,) = struct.unpack_from('>i', data, p)
                    if sid not in reg:
                        raise StreamError('offset %d: unregistered string id %d' % (p, sid))
                    rec[name] = reg[sid]
                    p += 4
            out.append(rec)
            pos = p
    except struct.error:
        if strict:
            raise StreamError('offset %d: stream ends inside a unit' % pos)
    return out, reg


class Server(object):
    """Accepts connections on 127.0.0.1 and keeps each one's bytes."""

    def __init__(self, port=0):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(('127.0.0.1', port))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = []       # bytearrays, one per connection
        self.live = []
        self.closed = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            buf = bytearray()
            with self.lock:
                self.conns.append(buf)
                self.live.append(c)
            threading.Thread(target=self._read, args=(c, buf), daemon=True).start()

    def _read(self, c, buf):
        while True:
            try:
                d = c.recv(65536)
            except OSError:
                return
            if not d:
                return
            with self.lock:
                buf += d

    def drop_connections(self):
        """Closes the accepted connections (the listener stays)."""
        with self.lock:
            live, self.live = self.live, []
        for c in live:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        self.drop_connections()

    def records(self):
        """All records of all connections, each connection decoded alone."""
        out = []
        with self.lock:
            conns = [bytes(b) for b in self.conns]
        for b in conns:
            out.extend(decode(b)[0])
        return out

    def wait_records(self, n, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            recs = self.records()
            if len(recs) >= n or time.monotonic() > deadline:
                return recs
            time.sleep(0.01)


def closed_port():
    """A port on 127.0.0.1 nothing listens on."""
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    p = s.getsockname()[1]
    s.close()
    return p
