"""Invocation headers: the identifier of a call that travels with a request
to another process (tracebridge.invocation_header, continue_from)::

    tb1-NODE-PID-INVOCATION-ORDER

fields separated by '-': the version "tb1"; the node (hostname) with '%',
'-' and every byte of its UTF-8 outside printable ASCII ('!'..'~') written
%XX (upper-case hex digits; any %XX is decoded); the process id, the
invocation id and the invocation's next orderIndex, as unsigned decimal
numbers (int32, int64, int32). The Go and C clients write and read the same
format. Pure functions.
"""

HEADER_NAME = 'Tracebridge-Invocation'
"""A name for the request header that carries it (HTTP, gRPC metadata, a
message property)."""

MAX_NODE = 255
"""Longest node, in bytes (DNS names have at most 253)."""

_MAX_LEN = 4 + 3 * MAX_NODE + 1 + 10 + 1 + 19 + 1 + 10
_INT32 = (1 << 31) - 1
_INT64 = (1 << 63) - 1
_HEX = '0123456789ABCDEF'
_PLAIN = frozenset(c for c in range(0x21, 0x7F) if c not in (0x25, 0x2D))  # not '%', '-'


def format_header(node, pid, invocation, order):
    """Returns the header of invocation (of process pid on node, whose next
    orderIndex is order), or None when node is longer than MAX_NODE bytes
    or a number is out of range."""
    b = node.encode('utf-8', 'surrogateescape') if isinstance(node, str) else bytes(node)
    if len(b) > MAX_NODE or not 0 <= pid <= _INT32 or not 0 <= invocation <= _INT64 or not 0 <= order <= _INT32:
        return None
    esc = []
    for c in b:
        if c in _PLAIN:
            esc.append(chr(c))
        else:
            esc.append('%' + _HEX[c >> 4] + _HEX[c & 15])
    return 'tb1-%s-%d-%d-%d' % (''.join(esc), pid, invocation, order)


def _num(s, limit):
    if not s or len(s) > 19 or not all('0' <= ch <= '9' for ch in s):
        return None
    v = int(s)
    return v if v <= limit else None


def parse_header(s):
    """Returns (node, pid, invocation, order) from a header, node a str (bytes
    that are not UTF-8 decoded with surrogateescape), or None when s is not
    a header."""
    if not isinstance(s, str) or len(s) > _MAX_LEN or not s.startswith('tb1-'):
        return None
    f = s[4:].split('-')
    if len(f) != 4:
        return None
    enc = f[0]
    out = bytearray()
    i = 0
    while i < len(enc):
        ch = enc[i]
        if ch != '%':
            if ord(ch) > 0x7F:
                out += ch.encode('utf-8', 'surrogateescape')
            else:
                out.append(ord(ch))
            i += 1
            continue
        h = enc[i + 1:i + 3]
        if len(h) != 2 or any(c not in '0123456789abcdefABCDEF' for c in h):
            return None
        out.append(int(h, 16))
        i += 3
    if len(out) > MAX_NODE:
        return None
    pid, inv, order = _num(f[1], _INT32), _num(f[2], _INT64), _num(f[3], _INT32)
    if pid is None or inv is None or order is None:
        return None
    return bytes(out).decode('utf-8', 'surrogateescape'), pid, inv, order
