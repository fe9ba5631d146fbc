"""Writer tests: an unreachable or restarting bridge, a full queue, the exit
flush and fork, seen from the program and from a local TCP server."""

import os
import socket
import subprocess
import sys
import textwrap
import time
import unittest

import tracebridge
from tracebridge import probe
from tests.support import Server, closed_port, decode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@probe
def call():
    return 1


def delta(before, after, key):
    return after[key] - before[key]


class WriterCase(unittest.TestCase):

    def setUp(self):
        tracebridge.flush(1.0)
        self.defaults = dict(max_queue=100000, backoff_min=0.1, backoff_max=10.0)

    def tearDown(self):
        tracebridge.configure(**self.defaults)
        tracebridge.flush(1.0)


class UnreachableTest(WriterCase):

    def test_never_blocks_and_counts_drops(self):
        tracebridge.configure(host='127.0.0.1', port=closed_port())
        before = tracebridge.stats()
        t0 = time.monotonic()
        for _ in range(2000):
            call()
        spent = time.monotonic() - t0
        self.assertLess(spent, 5.0)
        t0 = time.monotonic()
        tracebridge.flush(2.0)
        self.assertLess(time.monotonic() - t0, 2.5)
        after = tracebridge.stats()
        self.assertEqual(delta(before, after, 'recorded'), 6000)
        self.assertEqual(delta(before, after, 'dropped'), 6000)
        self.assertEqual(after['queued'], 0)
        self.assertFalse(after['connected'])
        self.assertIn('connect to 127.0.0.1', after['last_error'])

    def test_queue_full_drops_new_records(self):
        tracebridge.configure(host='127.0.0.1', port=closed_port(), max_queue=50, backoff_min=30.0)
        call()
        time.sleep(0.2)  # the first attempt failed; the next is 30 s away
        before = tracebridge.stats()
        for _ in range(100):
            call()
        after = tracebridge.stats()
        self.assertEqual(delta(before, after, 'recorded'), 300)
        self.assertLessEqual(after['queued'], 50)
        self.assertGreaterEqual(delta(before, after, 'dropped_queue_full'), 250)


class StalledBridgeTest(WriterCase):

    def test_a_bridge_that_stops_reading_never_blocks_the_program(self):
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        ls.bind(('127.0.0.1', 0))
        ls.listen(1)
        try:
            tracebridge.configure(host='127.0.0.1', port=ls.getsockname()[1], max_queue=2000,
                                  send_timeout=0.3)
            before = tracebridge.stats()
            t0 = time.monotonic()
            for _ in range(30000):
                call()
            spent = time.monotonic() - t0
            tracebridge.flush(2.0)
            after = tracebridge.stats()
            self.assertLess(spent, 20.0)
            self.assertEqual(delta(before, after, 'recorded'), 90000)
            self.assertGreater(delta(before, after, 'dropped'), 0)
            self.assertEqual(delta(before, after, 'recorded'),
                             delta(before, after, 'sent') + delta(before, after, 'dropped') + after['queued'])
        finally:
            tracebridge.configure(send_timeout=5.0, port=closed_port())
            ls.close()


class RestartTest(WriterCase):

    def test_records_wait_for_a_late_bridge(self):
        port = closed_port()
        tracebridge.configure(host='127.0.0.1', port=port, backoff_min=0.05, backoff_max=0.2)
        for _ in range(10):
            call()
        time.sleep(0.1)
        server = Server(port)
        try:
            recs = server.wait_records(30, timeout=10)
            self.assertEqual(len(recs), 30)
        finally:
            server.close()

    def test_reconnect_starts_a_new_registry(self):
        server = Server()
        try:
            tracebridge.configure(host='127.0.0.1', port=server.port, backoff_min=0.01, backoff_max=0.05)
            call()
            tracebridge.flush(5)
            self.assertEqual(len(server.wait_records(3)), 3)
            server.drop_connections()
            deadline = time.monotonic() + 10
            while len(server.conns) < 2 and time.monotonic() < deadline:
                call()
                tracebridge.flush(1)
                time.sleep(0.02)
            self.assertGreaterEqual(len(server.conns), 2)
            call()
            tracebridge.flush(5)
            time.sleep(0.1)
            with server.lock:
                conns = [bytes(b) for b in server.conns]
            for b in conns:
                recs, reg = decode(b)  # each connection decodes on its own
                self.assertEqual(reg[0], 'kieker.common.record.flow.trace.TraceMetadata')
            s = tracebridge.stats()
            self.assertGreaterEqual(s['connects'], 2)
        finally:
            server.close()


def run_python(code, env=None, timeout=30):
    e = dict(os.environ)
    e['PYTHONPATH'] = ROOT
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], env=e, capture_output=True,
                       text=True, timeout=timeout)
    return p, time.monotonic() - t0


PROGRAM = '''
    import os, tracebridge
    @tracebridge.probe
    def f(n):
        return f(n - 1) if n else 0
    for _ in range(100):
        f(4)
    if os.environ.get('FORK'):
        pid = os.fork()
        if pid == 0:
            f(0)
            tracebridge.shutdown()
            os._exit(0)
        os.waitpid(pid, 0)
    print(tracebridge.stats()['recorded'])
'''


class ExitTest(unittest.TestCase):

    def test_exit_flushes(self):
        server = Server()
        try:
            p, _ = run_python(PROGRAM, {'TRACEBRIDGE_PORT': str(server.port)})
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.strip(), '1100')
            self.assertEqual(p.stderr, '')
            self.assertEqual(len(server.wait_records(1100)), 1100)
        finally:
            server.close()

    def test_exit_without_bridge_is_prompt_and_reports(self):
        p, spent = run_python(PROGRAM, {'TRACEBRIDGE_PORT': str(closed_port())})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(spent, 15)
        self.assertIn('tracebridge: 1100 of 1100 records dropped', p.stderr)

    def test_exit_disabled(self):
        p, _ = run_python(PROGRAM, {'TRACEBRIDGE_PORT': str(closed_port()), 'TRACEBRIDGE_ENABLED': '0'})
        self.assertEqual((p.returncode, p.stdout.strip(), p.stderr), (0, '0', ''))

    @unittest.skipUnless(hasattr(os, 'fork'), 'no fork')
    def test_fork_child_has_its_own_connection(self):
        server = Server()
        try:
            p, _ = run_python(PROGRAM, {'TRACEBRIDGE_PORT': str(server.port), 'FORK': '1'})
            self.assertEqual(p.returncode, 0, p.stderr)
            recs = server.wait_records(1103)
            time.sleep(0.2)
            with server.lock:
                conns = [decode(bytes(b))[0] for b in server.conns]
            self.assertEqual(sorted(len(c) for c in conns), [3, 1100])
        finally:
            server.close()
        self.assertEqual(len(recs), 1103)


if __name__ == '__main__':
    unittest.main()
