"""The TCP writer: a background thread that sends queued records to a
tracebridge (or any Kieker single-socket TCP reader) and never makes the
instrumented program wait.

Probes append record tuples to ``Writer.queue`` (a deque) after checking its
length against ``Writer.max_queue``; a record that finds the queue full is
dropped and counted (``note_full``). The thread wakes every ``interval``
seconds (or when flushed), takes everything queued, encodes it with the
connection's registry (kieker.py) and sends it with one ``sendall``.

Connection rules: the first connection is made when the first record is
queued. A failed connect is retried with exponential back-off
(``backoff_min`` doubling up to ``backoff_max``); meanwhile records stay
queued (up to the bound) so a restarting bridge loses nothing. A send that
fails drops the records of that batch (counted as unreachable), closes the
connection and schedules a reconnect; every connection starts a new string
registry, ids from 0. A connection whose registry grows past
``max_registry`` strings is replaced by a new one, bounding memory.

``flush`` makes one immediate connection attempt whatever the back-off, and
drops (and counts) what it cannot send; it waits at most its timeout.
``close`` flushes and stops the thread. Both are safe to call from any
thread, twice, and without a started thread.
"""

import collections
import socket
import threading
import time

from . import kieker


class Writer(object):
    """Sends queued records over one TCP connection at a time."""

    def __init__(self, host='127.0.0.1', port=10133, max_queue=100000, interval=0.02,
                 connect_timeout=1.0, send_timeout=5.0, backoff_min=0.1, backoff_max=10.0,
                 max_registry=1 << 20, logging_timestamps=False, batch=8192):
        self.host = host
        self.port = int(port)
        self.queue = collections.deque()
        self.max_queue = int(max_queue)
        self.interval = float(interval)
        self.connect_timeout = float(connect_timeout)
        self.send_timeout = float(send_timeout)
        self.backoff_min = float(backoff_min)
        self.backoff_max = float(backoff_max)
        self.max_registry = int(max_registry)
        self.logging_timestamps = bool(logging_timestamps)
        self.batch = int(batch)

        self._wake = threading.Event()
        self._lock = threading.Lock()       # counters touched by several threads
        self._cond = threading.Condition(self._lock)
        self._io = threading.Lock()         # one sender at a time
        self._thread = None
        self._stop = False
        self._force = 0                     # pending flush requests

        self._sock = None
        self._reg = None
        self._backoff = self.backoff_min
        self._next_attempt = 0.0

        # Counters. taken and the sent/dropped counts are written by the
        # sender only; dropped_full under _lock.
        self.taken = 0
        self.sent = 0
        self.dropped_full = 0
        self.dropped_unreachable = 0
        self.unencodable = 0
        self.bytes_sent = 0
        self.connects = 0
        self.connect_failures = 0
        self.last_error = None

    # ---- called by probes ----

    def start(self):
        """Starts the sender thread (idempotent). Never raises."""
        with self._lock:
            if self._thread is not None or self._stop:
                return
            t = threading.Thread(target=self._run, name='tracebridge-writer', daemon=True)
            self._thread = t
        try:
            t.start()
        except Exception as e:  # e.g. at interpreter shutdown: flush() sends inline
            self.last_error = 'cannot start the writer thread: %s' % (e,)

    def note_full(self):
        """Counts a record dropped because the queue was full."""
        with self._lock:
            self.dropped_full += 1
        self._wake.set()

    # ---- control ----

    def flush(self, timeout=2.0):
        """Sends everything queued so far, waiting at most timeout seconds.
        Returns True when nothing is left (sent or dropped), False on timeout."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            target = self.taken + len(self.queue)
            self._force += 1
            alive = self._thread is not None and self._thread.is_alive()
        try:
            if not alive:
                self._drain(forced=True, deadline=deadline)
                return not self.queue
            self._wake.set()
            with self._cond:
                while self._done() < target:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(min(left, 0.05))
                    self._wake.set()
            return True
        finally:
            with self._lock:
                self._force -= 1

    def close(self, timeout=2.0):
        """Flushes, stops the thread and closes the connection, all within
        about timeout seconds. Records arriving later are kept in the queue
        (up to its bound) and reported as queued; they are not sent."""
        deadline = time.monotonic() + max(0.0, timeout)
        ok = self.flush(timeout)
        with self._lock:
            self._stop = True
            t = self._thread
        self._wake.set()
        if t is not None and t is not threading.current_thread():
            t.join(max(0.0, deadline - time.monotonic()))
        if self._io.acquire(timeout=max(0.01, deadline - time.monotonic())):
            try:
                self._disconnect()
            finally:
                self._io.release()
        return ok

    def stats(self):
        """Returns a dict of counters (a consistent-enough snapshot)."""
        with self._lock:
            full = self.dropped_full
        queued = len(self.queue)
        dropped = full + self.dropped_unreachable + self.unencodable
        return {
            'recorded': self.taken + queued + full,
            'sent': self.sent,
            'queued': queued,
            'dropped': dropped,
            'dropped_queue_full': full,
            'dropped_unreachable': self.dropped_unreachable,
            'dropped_unencodable': self.unencodable,
            'bytes_sent': self.bytes_sent,
            'connected': self._sock is not None,
            'connects': self.connects,
            'connect_failures': self.connect_failures,
            'last_error': self.last_error,
            'bridge': '%s:%d' % (self.host, self.port),
        }

    # ---- the sender ----

    def _done(self):
        return self.sent + self.dropped_unreachable + self.unencodable

    def _run(self):
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            try:
                self._drain(forced=self._force > 0)
            except Exception as e:  # never let the thread die
                self.last_error = 'writer: %r' % (e,)
            with self._cond:
                self._cond.notify_all()
            if self._stop:
                return

    def _drain(self, forced, deadline=None):
        """Sends what is queued. Without a connection and outside a flush,
        records stay queued until the next attempt is due."""
        if not self._io.acquire(timeout=0 if deadline is None else max(0.0, deadline - time.monotonic())):
            return
        try:
            q = self.queue
            while q:
                if deadline is not None and time.monotonic() > deadline:
                    return
                if self._sock is None and not self._connect(forced):
                    if not forced:
                        return
                    self._drop_queued()
                    return
                items = []
                pop = q.popleft
                try:
                    for _ in range(self.batch):
                        items.append(pop())
                except IndexError:
                    pass
                self.taken += len(items)
                buf = bytearray()
                n = kieker.append_records(buf, self._reg, items, self.logging_timestamps)
                self.unencodable += len(items) - n
                try:
                    self._sock.sendall(buf)
                except (OSError, ValueError) as e:
                    self.last_error = 'send to %s:%d: %s' % (self.host, self.port, e)
                    self.dropped_unreachable += n
                    self._disconnect()
                    self._schedule_retry()
                    continue
                self.sent += n
                self.bytes_sent += len(buf)
                if len(self._reg) > self.max_registry:
                    self._disconnect()  # the next connection starts a fresh registry
        finally:
            self._io.release()

    def _drop_queued(self):
        q = self.queue
        n = 0
        try:
            while True:
                q.popleft()
                n += 1
        except IndexError:
            pass
        self.taken += n
        self.dropped_unreachable += n

    def _connect(self, forced):
        now = time.monotonic()
        if not forced and now < self._next_attempt:
            return False
        try:
            s = socket.create_connection((self.host, self.port), self.connect_timeout)
            s.settimeout(self.send_timeout)
        except (OSError, ValueError) as e:
            self.connect_failures += 1
            self.last_error = 'connect to %s:%d: %s' % (self.host, self.port, e)
            self._schedule_retry()
            return False
        self._sock = s
        self._reg = kieker.Registry()
        self._backoff = self.backoff_min
        self.connects += 1
        return True

    def _schedule_retry(self):
        self._next_attempt = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self.backoff_max)

    def _disconnect(self):
        s, self._sock, self._reg = self._sock, None, None
        if s is not None:
            try:
                s.close()
            except OSError:
                pass

    def _after_fork_in_child(self):
        """The child of a fork starts without the parent's connection,
        queue contents or thread."""
        s = self._sock
        self.__init__(self.host, self.port, self.max_queue, self.interval, self.connect_timeout,
                      self.send_timeout, self.backoff_min, self.backoff_max, self.max_registry,
                      self.logging_timestamps, self.batch)
        if s is not None:
            try:
                s.close()  # the child's copy only; the parent's connection stays open
            except OSError:
                pass
