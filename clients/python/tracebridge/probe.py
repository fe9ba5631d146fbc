"""Probes: the @probe decorator, the trace() context manager and the
per-thread trace state they share.

Each thread has its own trace state (threading.local): the current trace id,
the next order index and the call depth. The first probed call of a thread
with no open trace starts a trace (a TraceMetadata record with a new trace
id, parentTraceId = traceId and parentOrderId = -1 as Kieker's Java and
Python probes write for a root trace); the trace ends when that call
returns. Every Before/After/AfterOperationFailed event takes the next
order index of its trace, so orderIndex runs 0, 1, 2, … within a trace.

Trace ids are unique within a process and, with a random 16-bit prefix in
bits 47–62, unlikely to collide between processes.

A probe never raises into the program and never blocks it: a record that
finds the queue full is dropped and counted, the exception of a failing
call is re-raised unchanged after its AfterOperationFailedEvent is queued.
After os.fork() the child starts with no open trace, an empty queue and its
own connection; calls that were in progress at the fork record nothing more
in the child.
"""

import collections
import functools
import inspect
import itertools
import os
import random
import sys
import threading
import time

from . import kieker

_time_ns = time.time_ns
_META, _BEFORE, _AFTER, _FAILED = kieker.META, kieker.BEFORE, kieker.AFTER, kieker.FAILED

MAX_CAUSE = 1024
"""Longest cause (characters) of an AfterOperationFailedEvent."""

NO_SESSION = '<no-session-id>'


class _Config(object):
    """Settings read by the probes (module-wide, see configure)."""

    def __init__(self):
        self.hostname = _hostname()
        self.session_id = NO_SESSION


def _hostname():
    try:
        import socket
        return socket.gethostname() or '<default-host>'
    except Exception:
        return '<default-host>'


class _State(object):
    """One thread's trace state."""

    __slots__ = ('trace', 'order', 'depth', 'q')

    def __init__(self, q):
        self.trace = 0
        self.order = 0
        self.depth = 0
        self.q = q


_cfg = _Config()
_enabled = True          # probes record (set_enabled)
_writer = None           # the Writer, set by __init__
_maxq = 0                # the writer's queue bound, copied for the hot path
_local = threading.local()
_ids = itertools.count(1)
_prefix = random.getrandbits(16) << 47


def _bind(writer):
    """Makes writer the destination of all probes (called by configure)."""
    global _writer, _maxq
    _writer = writer
    _maxq = writer.max_queue


def set_enabled(on):
    """Switches all probes on or off."""
    global _enabled
    _enabled = bool(on)


def is_enabled():
    return _enabled


def _new_state():
    st = _State(_writer.queue)
    _local.st = st
    return st


def _start_trace(st):
    """Opens a new root trace on st and queues its TraceMetadata."""
    tid = _prefix | (next(_ids) & 0x7FFFFFFFFFFF)
    st.trace = tid
    st.order = 0
    w = _writer
    if w._thread is None:
        w.start()
    q = st.q
    if len(q) < _maxq:
        q.append((_META, _time_ns(), tid, threading.get_ident(), _cfg.session_id, _cfg.hostname, tid, -1))
    else:
        w.note_full()


def _cause(e):
    try:
        c = repr(e)
    except Exception:
        c = type(e).__name__
    if len(c) > MAX_CAUSE:
        c = c[:MAX_CAUSE]
    return c


def signature(func, operation=None, cls=None):
    """Returns the (operationSignature, classSignature) a probe on func
    records: module.qualname, and module.Class for a method (the qualname
    without its last part), or the module for a plain function."""
    module = getattr(func, '__module__', None) or '<unknown>'
    qual = getattr(func, '__qualname__', None) or getattr(func, '__name__', None) or repr(func)
    if operation is None:
        operation = module + '.' + qual
    if cls is None:
        head, dot, _ = qual.rpartition('.')
        cls = module + '.' + head if dot else module
    return str(operation), str(cls)


def probe(func=None, operation=None, cls=None):
    """Decorates a function (or method) so that each call records a
    BeforeOperationEvent and an AfterOperationEvent, or an
    AfterOperationFailedEvent with repr(exception) as cause when it raises
    (the exception propagates unchanged). Use as @probe or
    @probe(operation='...', cls='...'). Generator and coroutine functions
    record the call that creates the generator or coroutine object (a
    coroutine awaited in one thread and resumed interleaved with others
    cannot be traced with per-thread state)."""
    if func is None:
        return lambda f: probe(f, operation=operation, cls=cls)
    if isinstance(func, (staticmethod, classmethod)):
        return type(func)(probe(func.__func__, operation=operation, cls=cls))
    op, klass = signature(func, operation, cls)
    if inspect.iscoroutinefunction(func):
        return _probe_coroutine(func, op, klass)

    def wrapper(*args, **kwargs):
        if not _enabled:
            return func(*args, **kwargs)
        try:
            st = _local.st
        except AttributeError:
            st = _new_state()
        if st.depth == 0:
            _start_trace(st)
        st.depth += 1
        tid = st.trace
        q = st.q
        o = st.order
        st.order = o + 1
        if len(q) < _maxq:
            q.append((_BEFORE, _time_ns(), tid, o, op, klass))
        else:
            _writer.note_full()
        try:
            r = func(*args, **kwargs)
        except BaseException as e:
            st.depth -= 1
            o = st.order
            st.order = o + 1
            if len(q) < _maxq:
                q.append((_FAILED, _time_ns(), tid, o, op, klass, _cause(e)))
            else:
                _writer.note_full()
            raise
        st.depth -= 1
        o = st.order
        st.order = o + 1
        if len(q) < _maxq:
            q.append((_AFTER, _time_ns(), tid, o, op, klass))
        else:
            _writer.note_full()
        return r

    return functools.update_wrapper(wrapper, func)


def _probe_coroutine(func, op, klass):
    async def wrapper(*args, **kwargs):
        if not _enabled:
            return await func(*args, **kwargs)
        with trace(op, klass):
            return await func(*args, **kwargs)

    return functools.update_wrapper(wrapper, func)


class trace(object):
    """A context manager recording the block as one operation call:

        with trace('checkout', 'shop.Cart'):
            ...

    It nests with @probe like any probed call, starting a trace when none is
    open in the thread. cls defaults to the caller's module name. An
    exception leaving the block records an AfterOperationFailedEvent and
    propagates. An instance may be entered again after it exited, but not
    while it is open."""

    __slots__ = ('operation', 'cls', '_st', '_tid')

    def __init__(self, operation, cls=None):
        if cls is None:
            try:
                cls = sys._getframe(1).f_globals.get('__name__') or '<unknown>'
            except Exception:
                cls = '<unknown>'
        self.operation = str(operation)
        self.cls = str(cls)
        self._st = None

    def __enter__(self):
        if not _enabled:
            self._st = None
            return self
        try:
            st = _local.st
        except AttributeError:
            st = _new_state()
        if st.depth == 0:
            _start_trace(st)
        st.depth += 1
        self._st = st
        self._tid = st.trace
        o = st.order
        st.order = o + 1
        q = st.q
        if len(q) < _maxq:
            q.append((_BEFORE, _time_ns(), self._tid, o, self.operation, self.cls))
        else:
            _writer.note_full()
        return self

    def __exit__(self, exc_type, exc, tb):
        st = self._st
        if st is None:
            return False
        self._st = None
        st.depth -= 1
        o = st.order
        st.order = o + 1
        q = st.q
        if len(q) < _maxq:
            if exc_type is None:
                q.append((_AFTER, _time_ns(), self._tid, o, self.operation, self.cls))
            else:
                q.append((_FAILED, _time_ns(), self._tid, o, self.operation, self.cls,
                          _cause(exc if exc is not None else exc_type)))
        else:
            _writer.note_full()
        return False


def current_trace():
    """Returns (traceId, next orderIndex, depth) of the calling thread's
    open trace, or None when it has none."""
    st = getattr(_local, 'st', None)
    if st is None or st.depth == 0:
        return None
    return st.trace, st.order, st.depth


def _after_fork_in_child():
    global _local
    st = getattr(_local, 'st', None)
    if st is not None:
        st.q = collections.deque(maxlen=0)  # in-progress calls record nothing more
    _local = threading.local()
    _writer._after_fork_in_child()
    _bind(_writer)


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_after_fork_in_child)
