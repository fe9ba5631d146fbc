"""Probe tests: the records @probe and trace() produce, read back from a
local TCP server with the independent decoder of tests/support.py."""

import asyncio
import threading
import unittest

import tracebridge
from tracebridge import probe, trace
from tests.support import Server


class ProbeCase(unittest.TestCase):

    def setUp(self):
        tracebridge.flush(1.0)  # leave nothing of earlier tests in the queue
        self.server = Server()
        tracebridge.configure(host='127.0.0.1', port=self.server.port, enabled=True,
                              hostname='test-host', session_id='s1')
        self.before = tracebridge.stats()

    def tearDown(self):
        tracebridge.flush(1.0)
        self.server.close()

    def records(self, n):
        self.assertTrue(tracebridge.flush(5.0))
        recs = self.server.wait_records(n)
        self.assertEqual(len(recs), n, recs)
        return recs


def events(recs):
    """Before/After/Failed events as compact strings, in orderIndex order."""
    sym = {'BeforeOperationEvent': '>', 'AfterOperationEvent': '<', 'AfterOperationFailedEvent': '!'}
    ev = sorted((r for r in recs if r['type'] in sym), key=lambda r: (r['traceId'], r['orderIndex']))
    return [sym[r['type']] + r['operationSignature'] for r in ev]


@probe
def leaf(x):
    return x * 2


@probe
def middle(x):
    return leaf(x) + leaf(x + 1)


@probe
def root(x):
    return middle(x)


class Shop(object):
    @probe
    def buy(self, item):
        if item == 'nothing':
            raise LookupError(item)
        return item

    @staticmethod
    @probe
    def static_first():
        return 's'

    @probe
    @staticmethod
    def static_outer():
        return 'o'

    @probe
    @classmethod
    def make(cls):
        return cls


class CallTreeTest(ProbeCase):

    def test_nested_calls(self):
        self.assertEqual(root(1), 6)
        recs = self.records(9)
        meta = recs[0]
        self.assertEqual(meta['type'], 'TraceMetadata')
        self.assertEqual((meta['hostname'], meta['sessionId'], meta['parentTraceId'], meta['parentOrderId']),
                         ('test-host', 's1', meta['traceId'], -1))
        self.assertEqual(meta['threadId'], threading.get_ident())
        m = __name__
        self.assertEqual(events(recs), ['>%s.root' % m, '>%s.middle' % m, '>%s.leaf' % m, '<%s.leaf' % m,
                                        '>%s.leaf' % m, '<%s.leaf' % m, '<%s.middle' % m, '<%s.root' % m])
        ev = recs[1:]
        self.assertEqual([r['orderIndex'] for r in ev], list(range(8)))
        self.assertTrue(all(r['traceId'] == meta['traceId'] for r in ev))
        self.assertTrue(all(r['classSignature'] == m for r in ev))
        ts = [r['timestamp'] for r in ev]
        self.assertEqual(ts, sorted(ts))

    def test_each_root_call_is_a_trace(self):
        leaf(1)
        leaf(2)
        recs = self.records(6)
        metas = [r for r in recs if r['type'] == 'TraceMetadata']
        self.assertEqual(len(metas), 2)
        self.assertNotEqual(metas[0]['traceId'], metas[1]['traceId'])
        self.assertEqual([r['orderIndex'] for r in recs if r['type'] != 'TraceMetadata'], [0, 1, 0, 1])

    def test_failure_propagates_unchanged(self):
        err = None
        try:
            Shop().buy('nothing')
        except LookupError as e:
            err = e
        self.assertIsInstance(err, LookupError)
        self.assertEqual(err.args, ('nothing',))
        recs = self.records(3)
        failed = recs[2]
        self.assertEqual(failed['type'], 'AfterOperationFailedEvent')
        self.assertEqual(failed['cause'], "LookupError('nothing')")
        self.assertEqual(failed['operationSignature'], __name__ + '.Shop.buy')
        self.assertEqual(failed['classSignature'], __name__ + '.Shop')

    def test_failure_inside_a_caught_call(self):
        @probe
        def outer():
            try:
                Shop().buy('nothing')
            except LookupError:
                return 'caught'
        self.assertEqual(outer(), 'caught')
        recs = self.records(5)
        op = __name__ + '.CallTreeTest.test_failure_inside_a_caught_call.<locals>.outer'
        self.assertEqual(events(recs), ['>' + op, '>%s.Shop.buy' % __name__, '!%s.Shop.buy' % __name__, '<' + op])

    def test_methods_keep_their_shape(self):
        s = Shop()
        self.assertEqual(Shop.buy.__name__, 'buy')
        self.assertEqual(Shop.buy.__qualname__, 'Shop.buy')
        self.assertTrue(hasattr(Shop.buy, '__wrapped__'))
        self.assertEqual((s.buy('x'), Shop.static_first(), s.static_outer(), Shop.make()),
                         ('x', 's', 'o', Shop))
        recs = self.records(12)
        m = __name__
        self.assertEqual(sorted(set(e[1:] for e in events(recs))),
                         sorted({m + '.Shop.buy', m + '.Shop.static_first', m + '.Shop.static_outer', m + '.Shop.make'}))

    def test_explicit_names(self):
        @probe(operation='op()', cls='a.B')
        def f():
            return 1

        @probe(cls='only.Class')
        def g():
            return 2
        self.assertEqual(f() + g(), 3)
        recs = self.records(6)
        self.assertEqual((recs[1]['operationSignature'], recs[1]['classSignature']), ('op()', 'a.B'))
        self.assertEqual(recs[4]['classSignature'], 'only.Class')
        self.assertTrue(recs[4]['operationSignature'].endswith('<locals>.g'))

    def test_signature(self):
        def nested():
            pass
        for f, want in [(leaf, (__name__ + '.leaf', __name__)),
                        (Shop.buy, (__name__ + '.Shop.buy', __name__ + '.Shop')),
                        (nested, None)]:
            with self.subTest(f=f):
                got = tracebridge.signature(f)
                if want is None:
                    self.assertTrue(got[0].endswith('.test_signature.<locals>.nested'))
                    self.assertTrue(got[1].endswith('.test_signature.<locals>'))
                else:
                    self.assertEqual(got, want)


class TraceBlockTest(ProbeCase):

    def test_block_nests_with_probes(self):
        with trace('checkout', 'shop.Cart') as t:
            self.assertEqual(tracebridge.current_trace()[1:], (1, 1))
            leaf(1)
        self.assertIsNone(tracebridge.current_trace())
        self.assertEqual(t.operation, 'checkout')
        recs = self.records(5)
        self.assertEqual(events(recs), ['>checkout', '>%s.leaf' % __name__, '<%s.leaf' % __name__, '<checkout'])
        self.assertEqual(recs[1]['classSignature'], 'shop.Cart')

    def test_block_failure_and_default_class(self):
        with self.assertRaises(ZeroDivisionError):
            with trace('divide'):
                1 / 0
        recs = self.records(3)
        self.assertEqual(recs[2]['type'], 'AfterOperationFailedEvent')
        self.assertEqual(recs[2]['cause'], "ZeroDivisionError('division by zero')")
        self.assertEqual(recs[2]['classSignature'], __name__)

    def test_probe_inside_block_inside_probe(self):
        @probe
        def outer():
            with trace('inner', 'x'):
                return leaf(2)
        self.assertEqual(outer(), 4)
        recs = self.records(7)
        self.assertEqual([r['orderIndex'] for r in recs[1:]], list(range(6)))
        self.assertEqual(len({r['traceId'] for r in recs}), 1)


class ThreadTest(ProbeCase):

    def test_threads_have_their_own_traces(self):
        barrier = threading.Barrier(4)
        idents = []

        @probe
        def work(n):
            barrier.wait(5)
            for _ in range(n):
                leaf(1)

        def run():
            idents.append(threading.get_ident())
            work(50)
        ts = [threading.Thread(target=run) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        recs = self.records(4 * (1 + 2 + 100))
        metas = [r for r in recs if r['type'] == 'TraceMetadata']
        self.assertEqual(sorted(m['threadId'] for m in metas), sorted(idents))
        for m in metas:
            mine = [r for r in recs if r['type'] != 'TraceMetadata' and r['traceId'] == m['traceId']]
            self.assertEqual(sorted(r['orderIndex'] for r in mine), list(range(102)))


class DisabledTest(ProbeCase):

    def test_disabled_probes_record_nothing(self):
        tracebridge.configure(enabled=False)
        try:
            self.assertFalse(tracebridge.enabled())
            self.assertEqual(root(1), 6)
            with trace('x'):
                leaf(1)
        finally:
            tracebridge.configure(enabled=True)
        leaf(1)
        recs = self.records(3)
        self.assertEqual(events(recs), ['>%s.leaf' % __name__, '<%s.leaf' % __name__])


class CoroutineTest(ProbeCase):

    def test_async_function(self):
        @probe
        async def fetch(x):
            await asyncio.sleep(0)
            return leaf(x)
        self.assertEqual(asyncio.run(fetch(3)), 6)
        recs = self.records(5)
        self.assertEqual([e[0] for e in events(recs)], ['>', '>', '<', '<'])
        self.assertTrue(events(recs)[0].endswith('<locals>.fetch'))


if __name__ == '__main__':
    unittest.main()
