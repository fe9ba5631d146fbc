"""tracebridge: a monitoring client for Python programs that sends Kieker
trace records (TraceMetadata, BeforeOperationEvent, AfterOperationEvent,
AfterOperationFailedEvent, and SplitEvent and JoinEvent where work moves to
other threads, thread pools or asyncio tasks; tracebridge's InvocationRecord
linking such work, and work other processes do on a call's behalf, to the
call that created it) to a tracebridge over Kieker's single-socket TCP
protocol. Standard library only, Python 3.8 or later.

    import tracebridge

    @tracebridge.probe
    def handle(request): ...

    with tracebridge.trace('checkout', 'shop.Cart'):
        ...

The bridge is TRACEBRIDGE_HOST:TRACEBRIDGE_PORT (default 127.0.0.1:10133)
or whatever configure() sets. TRACEBRIDGE_ENABLED=0 starts with the probes
disabled. Records are queued (bounded) and sent by a background thread; the
program never waits for the bridge and never sees its errors: records that
cannot be queued or sent are dropped and counted (stats()). At exit the
queue is flushed for at most exit_timeout seconds (2 s), and a line on
stderr reports dropped records, if any.

Thread safety: everything here may be called from any thread. See probe.py
for the trace model and writer.py for the connection rules.
"""

import atexit
import os
import sys

from . import kieker, probe as _probe_mod
from .probe import probe, trace, current_trace, signature, propagate, invocation_header, continue_from
from .header import HEADER_NAME, parse_header as parse_invocation_header
from .writer import Writer

__all__ = ['probe', 'trace', 'configure', 'stats', 'flush', 'shutdown', 'enabled',
           'current_trace', 'signature', 'propagate', 'invocation_header', 'continue_from',
           'parse_invocation_header', 'HEADER_NAME', 'kieker']
__version__ = '0.1.0'

_exit = {'timeout': 2.0, 'report': True}


def _env_writer():
    host = os.environ.get('TRACEBRIDGE_HOST') or '127.0.0.1'
    try:
        port = int(os.environ.get('TRACEBRIDGE_PORT') or 10133)
    except ValueError:
        port = 10133
    return Writer(host=host, port=port)


_probe_mod._bind(_env_writer())
if os.environ.get('TRACEBRIDGE_ENABLED', '').strip().lower() in ('0', 'false', 'no', 'off'):
    _probe_mod.set_enabled(False)
if os.environ.get('TRACEBRIDGE_PROPAGATE', '').strip().lower() in ('0', 'false', 'no', 'off'):
    _probe_mod.set_propagate(False)
if os.environ.get('TRACEBRIDGE_INVOCATIONS', '').strip().lower() in ('0', 'false', 'no', 'off'):
    _probe_mod.set_invocations(False)

_WRITER_KEYS = ('host', 'port', 'max_queue', 'interval', 'connect_timeout', 'send_timeout',
                'backoff_min', 'backoff_max', 'max_registry', 'logging_timestamps', 'batch')


def configure(host=None, port=None, enabled=None, hostname=None, session_id=None,
              exit_timeout=None, report_drops=None, propagate=None, invocations=None, **writer):
    """Changes settings; unset arguments keep their values.

    host, port        the bridge (default TRACEBRIDGE_HOST / TRACEBRIDGE_PORT,
                      else 127.0.0.1:10133); a change reconnects
    enabled           probes on or off (a disabled probe costs one check)
    propagate         threads, thread-pool work and asyncio tasks started in
                      a trace continue it as child traces (default True;
                      TRACEBRIDGE_PROPAGATE=0 starts with it off)
    invocations       send InvocationRecords and make invocation headers
                      (default True; TRACEBRIDGE_INVOCATIONS=0 starts with
                      them off, for a reader that knows only Kieker's
                      record types, such as Kieker's own)
    hostname          TraceMetadata.hostname (default socket.gethostname())
    session_id        TraceMetadata.sessionId (default '<no-session-id>')
    exit_timeout      how long the exit flush may take (default 2.0 s)
    report_drops      print dropped counts on stderr at exit (default True)
    max_queue         queued records before new ones are dropped (100000)
    interval          how often the writer thread sends (0.02 s)
    connect_timeout   one connection attempt (1.0 s)
    send_timeout      one send before the connection counts as dead (5.0 s)
    backoff_min/max   reconnect back-off (0.1 s doubling to 10 s)
    max_registry      strings per connection before reconnecting (1 << 20)
    logging_timestamps  put each record's time in its frame header (False: -1)
    """
    w = _probe_mod._writer
    unknown = set(writer) - set(_WRITER_KEYS)
    if unknown:
        raise TypeError('configure() got unknown arguments: %s' % ', '.join(sorted(unknown)))
    if host is not None:
        writer['host'] = host
    if port is not None:
        writer['port'] = port
    if writer:
        with w._io:
            for k, v in writer.items():
                cur = getattr(w, k)
                setattr(w, k, type(cur)(v))
            if 'host' in writer or 'port' in writer:
                w._disconnect()
                w._next_attempt = 0.0
                w._backoff = w.backoff_min
        _probe_mod._bind(w)
    if enabled is not None:
        _probe_mod.set_enabled(enabled)
    if propagate is not None:
        _probe_mod.set_propagate(propagate)
    if invocations is not None:
        _probe_mod.set_invocations(invocations)
    if hostname is not None:
        _probe_mod._cfg.hostname = str(hostname)
    if session_id is not None:
        _probe_mod._cfg.session_id = str(session_id)
    if exit_timeout is not None:
        _exit['timeout'] = float(exit_timeout)
    if report_drops is not None:
        _exit['report'] = bool(report_drops)


def enabled():
    """Reports whether probes record."""
    return _probe_mod.is_enabled()


def stats():
    """Returns the writer's counters as a dict: recorded (records the probes
    produced), sent, queued, dropped (= dropped_queue_full +
    dropped_unreachable + dropped_unencodable), bytes_sent, connected,
    connects, connect_failures, last_error, bridge."""
    return _probe_mod._writer.stats()


def flush(timeout=2.0):
    """Sends what is queued now, waiting at most timeout seconds; makes an
    immediate connection attempt and drops (counting them) the records it
    cannot send. Returns True when the queue was emptied in time."""
    return _probe_mod._writer.flush(timeout)


def shutdown(timeout=None):
    """Flushes (at most timeout, default exit_timeout) and stops the writer.
    Probes keep recording into the queue afterwards but nothing more is
    sent. Called at exit; safe to call twice."""
    if timeout is None:
        timeout = _exit['timeout']
    return _probe_mod._writer.close(timeout)


def _at_exit():
    try:
        shutdown()
        if _exit['report']:
            s = stats()
            if s['dropped'] or s['queued']:
                sys.stderr.write('tracebridge: %d of %d records dropped, %d unsent (bridge %s: %s)\n' % (
                    s['dropped'], s['recorded'], s['queued'], s['bridge'], s['last_error']))
    except Exception:
        pass


atexit.register(_at_exit)
