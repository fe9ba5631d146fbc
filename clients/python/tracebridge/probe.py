"""Probes: the @probe decorator, the trace() context manager, the trace
state they share, and its propagation to threads, thread pools and asyncio
tasks.

The trace state lives in a context variable: the current trace id, the next
order index and the call depth of a thread, or of an asyncio task (each
thread has its own context; each task runs in a copy of its creator's). The
first probed call with no open trace starts a trace (a TraceMetadata record
with a new trace id, parentTraceId = traceId and parentOrderId = -1 as
Kieker's Java and Python probes write for a root trace); the trace ends when
that call returns. Every event takes the next order index of its trace, so
orderIndex runs 0, 1, 2, … within a trace.

Thread hops, as Kieker's probes record a thread started from a traced
thread: a threading.Thread started, a function submitted to a
concurrent.futures.ThreadPoolExecutor or an asyncio task created while a
trace is open records a SplitEvent in that trace (its next order index), and
the first probed call of the new thread, work item or task starts a child
trace whose TraceMetadata names the parent's traceId and that order index
(parentTraceId, parentOrderId); Thread.join records a JoinEvent naming the
child. The hooks wrap threading.Thread.start/join,
ThreadPoolExecutor.submit and asyncio's BaseEventLoop.create_task (patched
once the modules are imported; configure(propagate=False) turns them off),
and propagate(fn) does the same for any other way of running fn elsewhere.
Every trace the new thread, work item or task starts hangs from the split
(the first takes the child id a JoinEvent names). A trace found open in a
context handed to another thread without a split (a
contextvars.copy_context().run) starts a child trace there with
parentOrderId -1, Kieker's mark of an unknown split point.

Invocation identifiers (tracebridge.trace.InvocationRecord): every trace
started from a split point also queues an InvocationRecord after its
TraceMetadata, naming the invocation of the trace that split (and that
trace's next orderIndex then, the SplitEvent's), captured where the
thread, work item or task was created, so that the bridge hangs the work
under the call that created it across reused threads, processes and nodes.
A trace that hands nothing on has no invocation: a trace gets its id (and
queues its own record, parent -1, created then) only when it first splits
or exports a header (invocation_header). continue_from(header) makes the
traces of a block children of a call in another process.

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
import contextvars
import functools
import inspect
import itertools
import os
import random
import sys
import threading
import time

from . import kieker
from .header import MAX_NODE, format_header, parse_header

_time_ns = time.time_ns
_get_ident = threading.get_ident
_META, _BEFORE, _AFTER, _FAILED = kieker.META, kieker.BEFORE, kieker.AFTER, kieker.FAILED
_SPLIT, _JOIN, _INV = kieker.SPLIT, kieker.JOIN, kieker.INV

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
    """The trace state of a thread or task: its trace (one at a time), or,
    before its first trace, the split point that trace hangs from. A state
    that a copied context may hold too (shared: an asyncio task was created
    with it) is never reused for a new trace, so that interleaving tasks
    never share one."""

    __slots__ = ('trace', 'order', 'depth', 'q', 'thread', 'pending', 'shared', 'inv', 'inv_of')

    def __init__(self, q, pending=None):
        self.trace = 0
        self.order = 0
        self.depth = 0
        self.q = q
        self.thread = _get_ident()
        self.pending = pending
        self.shared = False
        self.inv = 0      # the invocation id of trace inv_of (so a new trace
        self.inv_of = 0   # needs no reset: its id differs)


class _Split(object):
    """A split point: the parent trace (None: a call in another process,
    which Kieker's metadata cannot name), the order index of its SplitEvent,
    the id the child trace gets, whether the child has started it, and the
    parent's invocation: its id, process and node, and when the split was
    made."""

    __slots__ = ('parent', 'order', 'child', 'started', 'inv', 'pid', 'node', 'created')

    def __init__(self, parent, order, child, inv, pid, node, created):
        self.parent = parent
        self.order = order
        self.child = child
        self.started = False
        self.inv = inv
        self.pid = pid
        self.node = node
        self.created = created


_cfg = _Config()
_enabled = True          # probes record (set_enabled)
_propagate = True        # the thread, pool and task hooks split traces
_invocations = True      # InvocationRecords are sent (set_invocations)
_writer = None           # the Writer, set by __init__
_maxq = 0                # the writer's queue bound, copied for the hot path
_cv = contextvars.ContextVar('tracebridge_trace', default=None)
_cv_get = _cv.get
_cv_set = _cv.set
_ids = itertools.count(1)
_prefix = random.getrandbits(16) << 47
_invs = itertools.count(1)   # invocation ids
_pid = os.getpid()


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


def _new_id():
    return _prefix | (next(_ids) & 0x7FFFFFFFFFFF)


def _start_trace(old):
    """Opens a trace, queues its TraceMetadata and returns its state: old,
    the context's state, when the context alone holds it, else a new one
    made the context's. A split point in old makes the trace a child of
    the split; an open trace of another thread makes it a child with an
    unknown split point (parentOrderId -1); otherwise it is a root."""
    if old is not None and old.pending is None and not old.shared and old.depth == 0 \
            and old.thread == _get_ident() and old.q is _writer.queue:
        # The common case: the thread's (or task's) next trace. (A state
        # from before a fork holds the parent's queue: not reused.)
        tid = _prefix | (next(_ids) & 0x7FFFFFFFFFFF)
        old.trace = tid
        old.order = 0
        q = old.q
        if len(q) < _maxq:
            q.append((_META, _time_ns(), tid, old.thread, _cfg.session_id, _cfg.hostname, tid, -1))
        else:
            _writer.note_full()
        return old
    st = _State(_writer.queue)
    parent = porder = sp = None
    if old is not None:
        sp = old.pending
        if sp is not None:
            # Every trace of this thread (work item, task) hangs from the
            # split; the first takes the id the parent knows.
            st.pending = sp
            tid = sp.child if not sp.started else _new_id()
            sp.started = True
            if sp.parent is None:  # a remote caller: a root for Kieker
                parent, porder = tid, -1
            else:
                parent, porder = sp.parent, sp.order
        elif old.depth > 0:
            tid = _new_id()
            parent, porder = old.trace, -1
    if parent is None:
        tid = _prefix | (next(_ids) & 0x7FFFFFFFFFFF)
        parent, porder = tid, -1
    st.trace = tid
    _cv_set(st)
    if _patches and len(_modules) != _nmodules[0]:
        _patch_loaded()
    w = _writer
    if w._thread is None:
        w.start()
    q = st.q
    if len(q) < _maxq:
        q.append((_META, _time_ns(), tid, st.thread, _cfg.session_id, _cfg.hostname, parent, porder))
    else:
        w.note_full()
    if sp is not None and sp.inv:
        st.inv = inv = next(_invs)
        st.inv_of = tid
        if len(q) < _maxq:
            q.append((_INV, sp.created, inv, _pid, _cfg.hostname, st.thread,
                      sp.inv, sp.pid, sp.node, sp.order, tid))
        else:
            w.note_full()
    return st


def _invocation(st):
    """Returns the invocation id of st's open trace, giving the trace one
    (and queueing its InvocationRecord: a root's, no parent) when it has
    none yet."""
    if st.inv_of != st.trace:
        st.inv = inv = next(_invs)
        st.inv_of = st.trace
        q = st.q
        if len(q) < _maxq:
            q.append((_INV, _time_ns(), inv, _pid, _cfg.hostname, st.thread, -1, 0, '', -1, st.trace))
        else:
            _writer.note_full()
    return st.inv


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
    @probe(operation='...', cls='...'). Generator functions record the call
    that creates the generator; async def functions record the coroutine's
    run (each asyncio task has its own trace state, so interleaving tasks
    keep their traces apart)."""
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
        st = _cv_get()
        if st is None or st.depth == 0 or st.thread != _get_ident():
            st = _start_trace(st)
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
        st = _cv_get()
        if st is None or st.depth == 0 or st.thread != _get_ident():
            st = _start_trace(st)
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
    (or task's) open trace, or None when it has none."""
    st = _cv_get()
    if st is None or st.depth == 0 or st.thread != _get_ident():
        return None
    return st.trace, st.order, st.depth


# ---- thread hops ----

def _split():
    """Records a SplitEvent in the open trace of the calling thread or task
    and returns the split point, or None (no open trace, probes off)."""
    if not _enabled:
        return None
    st = _cv_get()
    if st is None or st.depth == 0 or st.thread != _get_ident():
        return None
    inv = _invocation(st) if _invocations else 0
    o = st.order
    st.order = o + 1
    now = _time_ns()
    sp = _Split(st.trace, o, _new_id(), inv, _pid, _cfg.hostname, now)
    q = st.q
    if len(q) < _maxq:
        q.append((_SPLIT, now, st.trace, o))
    else:
        _writer.note_full()
    return sp


def _join(child):
    """Records a JoinEvent naming trace child in the open trace of the
    calling thread or task."""
    st = _cv_get()
    if not _enabled or st is None or st.depth == 0 or st.thread != _get_ident():
        return
    o = st.order
    st.order = o + 1
    q = st.q
    if len(q) < _maxq:
        q.append((_JOIN, _time_ns(), st.trace, o, child))
    else:
        _writer.note_full()


def _adopt(sp):
    """Makes split point sp pending in the current context: its next trace
    is the child. Returns the context variable's token."""
    return _cv.set(_State(_writer.queue, sp))


def _run_split(sp, fn, args, kwargs):
    token = _adopt(sp)
    try:
        return fn(*args, **kwargs)
    finally:
        _cv.reset(token)


def propagate(fn):
    """Returns a callable that runs fn(*args, **kwargs) as a child of the
    calling thread's (or task's) open trace, wherever and whenever it is
    called: a SplitEvent is recorded now, and the first probed call of fn
    starts a child trace linked to it. Without an open trace (or with the
    probes off) it returns fn itself. For ways of running code elsewhere
    the hooks do not cover (a queue read by a worker thread, a callback of
    another library); call the result once."""
    sp = _split()
    if sp is None:
        return fn

    def run(*args, **kwargs):
        return _run_split(sp, fn, args, kwargs)
    return functools.update_wrapper(run, fn)


def invocation_header():
    """Returns the identifier of the call open in the calling thread (or
    task), for a request to another process, or None when no trace is open
    (or the probes are off):

        tb1-NODE-PID-INVOCATION-ORDER

    the hostname (TraceMetadata's) with '%', '-' and bytes outside printable
    ASCII written %XX, the process id, the trace's invocation id and its next
    orderIndex (see header.py). Send it with the request (HEADER_NAME); the
    other process runs its work in continue_from(header), and the bridge
    hangs that work under the call open here. Queues the trace's
    InvocationRecord if it has none yet (no SplitEvent)."""
    if not _enabled or not _invocations:
        return None
    st = _cv_get()
    if st is None or st.depth == 0 or st.thread != _get_ident():
        return None
    if len(_cfg.hostname.encode('utf-8', 'surrogateescape')) > MAX_NODE:
        return None
    return format_header(_cfg.hostname, _pid, _invocation(st), st.order)


class continue_from(object):
    """A context manager for work done on behalf of a call in another
    process, whose invocation_header() came with the request:

        with tracebridge.continue_from(request.headers.get(tracebridge.HEADER_NAME)):
            handle(request)

    Every trace the block starts (its first probed call's, and the next
    ones) queues an InvocationRecord naming the caller's invocation and
    orderIndex, by which the bridge hangs it under the caller's call; for
    Kieker's tools it is a root (the header names no traceId). A header that
    is None or does not parse changes nothing: the block's calls trace as
    usual. The block's traces are its own even if one is open around it.
    Not reentrant; use one instance per block."""

    __slots__ = ('header', '_token')

    def __init__(self, header):
        self.header = header
        self._token = None

    def __enter__(self):
        self._token = None
        if not _enabled or not _invocations:
            return self
        h = parse_header(self.header)
        if h is not None:
            node, pid, inv, order = h
            sp = _Split(None, order, _new_id(), inv, pid, node, _time_ns())
            self._token = _cv.set(_State(_writer.queue, sp))
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._token is not None:
            _cv.reset(self._token)
            self._token = None
        return False


_no_split = contextvars.ContextVar('tracebridge_no_split', default=False)


# The hooks below never let a failure of their own reach the program: the
# thread, work item or task then starts as it would without tracebridge.

def _thread_start(start):
    def wrapper(self):
        try:
            sp = _split() if _propagate and not _no_split.get() else None
            if sp is not None:
                self._tracebridge_split = sp
                run = self.run

                def run_child():
                    _adopt(sp)
                    run()
                self.run = run_child
        except Exception:
            pass
        return start(self)
    return functools.update_wrapper(wrapper, start)


def _thread_join(join):
    def wrapper(self, *args, **kwargs):
        r = join(self, *args, **kwargs)
        try:
            sp = self.__dict__.get('_tracebridge_split')
            if sp is not None and sp.started and not self.is_alive():
                self._tracebridge_split = None
                _join(sp.child)
        except Exception:
            pass
        return r
    return functools.update_wrapper(wrapper, join)


def _context_run(fn):
    """Returns the Context whose run method fn is (ctx.run, or a partial of
    it, as asyncio.to_thread and run_in_executor callers submit), or None."""
    if isinstance(fn, functools.partial):
        fn = fn.func
    ctx = getattr(fn, '__self__', None)
    if isinstance(ctx, contextvars.Context) and getattr(fn, '__name__', None) == 'run':
        return ctx
    return None


def _pool_submit(submit):
    def wrapper(self, fn, *args, **kwargs):
        try:
            sp = _split() if _propagate else None
            if sp is not None:
                ctx = _context_run(fn)
                if ctx is not None:
                    # fn runs in that context copy: the split goes there.
                    ctx.run(_adopt, sp)
                else:
                    fn, args, kwargs = functools.partial(_run_split, sp, fn, args, kwargs), (), {}
                # The pool may start a worker thread now: the worker is not
                # the work's child (the work item is), so it gets no split.
                token = _no_split.set(True)
        except Exception:
            sp = None
        if sp is None:
            return submit(self, fn, *args, **kwargs)
        try:
            return submit(self, fn, *args, **kwargs)
        finally:
            _no_split.reset(token)
    return functools.update_wrapper(wrapper, submit)


# The event loop's own housekeeping (asyncio.run runs these as tasks when
# it ends): outside the caller's trace.
_LOOP_INTERNAL = frozenset(['BaseEventLoop.shutdown_asyncgens', 'BaseEventLoop.shutdown_default_executor'])


def _task_context(coro, kwargs):
    """Returns the context a new task of coro should run in (a copy of the
    caller's whose trace state is the split's child), or None for the
    default."""
    given = kwargs.get('context')
    if given is not None:  # the task runs in the caller's context
        st = given.get(_cv)
        if st is not None:
            st.shared = True
        return None
    if getattr(coro, '__qualname__', None) in _LOOP_INTERNAL:
        if _cv_get() is None:
            return None
        ctx = contextvars.copy_context()
        ctx.run(_cv.set, None)
        return ctx
    sp = _split()
    if sp is None:  # the task's copy of the context holds the caller's state
        st = _cv_get()
        if st is not None:
            st.shared = True
        return None
    ctx = contextvars.copy_context()
    ctx.run(_adopt, sp)
    return ctx


def _loop_create_task(create_task):
    def wrapper(self, coro, *args, **kwargs):
        ctx = None
        if _propagate:
            try:
                ctx = _task_context(coro, kwargs)
            except Exception:
                ctx = None
        if ctx is None:
            return create_task(self, coro, *args, **kwargs)
        if _TASK_CONTEXT:
            kwargs['context'] = ctx
            return create_task(self, coro, *args, **kwargs)
        return ctx.run(create_task, self, coro, *args, **kwargs)
    return functools.update_wrapper(wrapper, create_task)


_TASK_CONTEXT = sys.version_info >= (3, 11)  # create_task(context=…)


def _patch_threading():
    T = threading.Thread
    if not getattr(T.start, '_tracebridge', False):
        T.start = _thread_start(T.start)
        T.start._tracebridge = True
        T.join = _thread_join(T.join)


def _patch_pool(mod):
    P = mod.ThreadPoolExecutor
    if not getattr(P.submit, '_tracebridge', False):
        P.submit = _pool_submit(P.submit)
        P.submit._tracebridge = True


def _patch_asyncio(mod):
    L = mod.BaseEventLoop
    if not getattr(L.create_task, '_tracebridge', False):
        L.create_task = _loop_create_task(L.create_task)
        L.create_task._tracebridge = True
    # run_in_executor and to_thread load the default executor's module
    # only when first used, inside a trace: load and patch it now.
    import concurrent.futures.thread as pool
    _patches.pop('concurrent.futures.thread', None)
    _patch_pool(pool)


# Modules patched once imported (importing them here would slow every
# program down): checked at import and whenever a trace starts after a
# module was imported, before the trace can split.
_patches = {'concurrent.futures.thread': _patch_pool, 'asyncio.base_events': _patch_asyncio}
_modules = sys.modules
_nmodules = [0]  # len(sys.modules) at the last check


def _patch_loaded():
    _nmodules[0] = len(_modules)
    for name in list(_patches):
        mod = sys.modules.get(name)
        if mod is not None:
            try:
                _patches.pop(name)(mod)
            except Exception:
                pass  # an unusual version of the module: no propagation through it


def install_hooks():
    """Patches threading.Thread.start/join, and ThreadPoolExecutor.submit
    and asyncio's BaseEventLoop.create_task once their modules are loaded.
    Called at import; safe to call again."""
    _patch_threading()
    _patch_loaded()


def set_invocations(on):
    """Switches the InvocationRecords (and invocation headers) on or off."""
    global _invocations
    _invocations = bool(on)


def set_propagate(on):
    """Switches the splitting of traces by the hooks on or off."""
    global _propagate
    _propagate = bool(on)


def _after_fork_in_child():
    global _pid
    _pid = os.getpid()
    st = _cv_get()
    if st is not None:
        st.q = collections.deque(maxlen=0)  # in-progress calls record nothing more
        st.pending = None
    _writer._after_fork_in_child()
    _bind(_writer)


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_after_fork_in_child)

install_hooks()
