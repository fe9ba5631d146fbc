"""Probe tests: the records @probe and trace() produce, read back from a
local TCP server with the independent decoder of tests/support.py."""

import asyncio
import os
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

    def records(self, n, invocations=0):
        """Waits for n records and invocations InvocationRecords more."""
        n += invocations
        self.assertTrue(tracebridge.flush(5.0))
        recs = self.server.wait_records(n)
        self.assertEqual(len(recs), n, recs)
        self.assertEqual(len([r for r in recs if r['type'] == 'InvocationRecord']), invocations, recs)
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


class PropagationTest(ProbeCase):
    """Thread hops: the parent's SplitEvent, the child's TraceMetadata
    naming it, the JoinEvent, for threads, pools, tasks and propagate()."""

    def links(self, recs, invocations=True):
        """Returns {traceId: (parentTraceId, parentOrderId)}, {(traceId,
        orderIndex): kind} of the split and join events, and the joins."""
        metas = {r['traceId']: (r['parentTraceId'], r['parentOrderId']) for r in recs if r['type'] == 'TraceMetadata'}
        points = {(r['traceId'], r['orderIndex']): r['type'] for r in recs if r['type'] in ('SplitEvent', 'JoinEvent')}
        joins = {r['traceId']: r['joinedTraceId'] for r in recs if r['type'] == 'JoinEvent'}
        # orderIndex runs 0..n-1 in every trace, split and join events too.
        for tid in metas:
            orders = sorted(r['orderIndex'] for r in recs
                            if r['type'] not in ('TraceMetadata', 'InvocationRecord') and r['traceId'] == tid)
            self.assertEqual(orders, list(range(len(orders))), tid)
        # Every child of a split has an InvocationRecord naming its parent
        # trace's (a root's: no parent) and the split's orderIndex.
        invs = {r['traceId']: r for r in recs if r['type'] == 'InvocationRecord'}
        for tid, (parent, porder) in metas.items():
            if parent == tid or porder < 0 or not invocations:
                continue
            inv, pinv = invs.get(tid), invs.get(parent)
            self.assertIsNotNone(inv, tid)
            self.assertIsNotNone(pinv, parent)
            self.assertEqual(pinv['parentInvocationId'], -1)
            self.assertEqual((inv['parentInvocationId'], inv['parentOrderId'], inv['parentProcessId'], inv['parentNodeId']),
                             (pinv['invocationId'], porder, pinv['processId'], 'test-host'))
            self.assertEqual((inv['nodeId'], inv['processId']), ('test-host', os.getpid()))
            child_meta = [r for r in recs if r['type'] == 'TraceMetadata' and r['traceId'] == tid][0]
            self.assertEqual(inv['runnableId'], child_meta['threadId'])
        return metas, points, joins

    def test_thread(self):
        @probe
        def parent():
            t = threading.Thread(target=leaf, args=(1,))
            t.start()
            t.join()
        parent()
        # parent: meta, >, split, join, <; child: meta, >, <; both
        # InvocationRecords
        recs = self.records(8, invocations=2)
        metas, points, joins = self.links(recs)
        self.assertEqual(len(metas), 2)
        (root_id, root_link), = [(k, v) for k, v in metas.items() if v[0] == k]
        (child_id, child_link), = [(k, v) for k, v in metas.items() if v[0] != k]
        self.assertEqual(root_link, (root_id, -1))
        self.assertEqual(child_link, (root_id, 1))
        self.assertEqual(points, {(root_id, 1): 'SplitEvent', (root_id, 2): 'JoinEvent'})
        self.assertEqual(joins, {root_id: child_id})
        child_meta = [r for r in recs if r['type'] == 'TraceMetadata' and r['traceId'] == child_id][0]
        self.assertNotEqual(child_meta['threadId'], threading.get_ident())

    def test_thread_outside_a_trace_is_a_root(self):
        t = threading.Thread(target=leaf, args=(1,))
        t.start()
        t.join()
        recs = self.records(3)
        self.assertEqual([r['type'] for r in recs].count('SplitEvent'), 0)
        self.assertEqual(recs[0]['parentTraceId'], recs[0]['traceId'])

    def test_pool_and_every_trace_of_a_work_item(self):
        from concurrent.futures import ThreadPoolExecutor

        def job(x):  # not probed: both calls hang from the split
            return leaf(x) + leaf(x)

        @probe
        def parent():
            with ThreadPoolExecutor(2) as pool:
                return sum(pool.map(job, [1, 2, 3]))
        self.assertEqual(parent(), 24)
        # parent: meta, >, 3 splits, <; 6 child traces of 3 records
        recs = self.records(6 + 18, invocations=1 + 6)
        metas, points, _ = self.links(recs)
        root_id = [k for k, v in metas.items() if v[0] == k][0]
        splits = sorted(o for (tid, o), kind in points.items() if tid == root_id)
        self.assertEqual(splits, [1, 2, 3])
        children = sorted(v[1] for k, v in metas.items() if k != root_id)
        self.assertEqual(children, [1, 1, 2, 2, 3, 3])
        self.assertTrue(all(v[0] == root_id for v in metas.values()))

    def test_pool_running_a_context_copy(self):
        import contextvars
        from concurrent.futures import ThreadPoolExecutor

        @probe
        def parent():
            with ThreadPoolExecutor(1) as pool:
                ctx = contextvars.copy_context()  # holds parent's open trace
                return pool.submit(ctx.run, leaf, 1).result()
        self.assertEqual(parent(), 2)
        # parent: meta, >, split, <; the work: meta, >, < (a child of the
        # split, not of an unknown point)
        recs = self.records(4 + 3, invocations=2)
        metas, points, _ = self.links(recs)
        root_id = [k for k, v in metas.items() if v[0] == k][0]
        self.assertEqual(sorted(v for k, v in metas.items() if k != root_id), [(root_id, 1)])

    def test_asyncio_tasks(self):
        @probe
        async def child(x):
            await asyncio.sleep(0.001)
            return leaf(x)

        @probe
        async def parent():
            a = asyncio.ensure_future(child(1))
            b = asyncio.create_task(child(2))
            if hasattr(asyncio, 'to_thread'):  # Python 3.9+
                off = await asyncio.to_thread(leaf, 3)
            else:
                off = await asyncio.get_event_loop().run_in_executor(None, leaf, 3)
            return await asyncio.gather(a, b) + [off]

        self.assertEqual(asyncio.run(parent()), [2, 4, 6])
        # parent: meta, >, 3 splits (two tasks, the thread), <; two task
        # traces of 5 records (child, leaf), one thread trace of 3
        recs = self.records(6 + 5 + 5 + 3, invocations=1 + 3)
        metas, points, _ = self.links(recs)
        roots = [k for k, v in metas.items() if v[0] == k]
        self.assertEqual(len(roots), 1, metas)
        root_id = roots[0]
        self.assertEqual(sorted(v[1] for k, v in metas.items() if k != root_id), [1, 2, 3])
        self.assertEqual(sorted(o for (tid, o) in points if tid == root_id), [1, 2, 3])
        # The tasks interleave but each keeps its own order indexes.
        for k in metas:
            if k != root_id:
                self.assertEqual(metas[k][0], root_id)

    def test_tasks_outside_a_trace_keep_apart(self):
        leaf(0)  # the thread has a trace state (at depth 0) the tasks copy

        @probe
        async def work(i):
            for _ in range(3):
                await asyncio.sleep(0)
                leaf(i)

        async def main():  # not probed: the tasks are roots
            await asyncio.gather(work(1), work(2))
        asyncio.run(main())
        recs = self.records(3 + 2 * 9)
        metas, points, _ = self.links(recs)
        self.assertEqual(len(metas), 3)
        self.assertTrue(all(v == (k, -1) for k, v in metas.items()))
        self.assertEqual(points, {})

    def test_propagate_and_unknown_split_point(self):
        import contextvars
        got = []

        @probe
        def parent():
            job = tracebridge.propagate(leaf)
            ctx = contextvars.copy_context()  # the open trace, no split
            t = threading.Thread(target=lambda: got.append((job(1), ctx.run(leaf, 2))))
            tracebridge.configure(propagate=False)  # this thread start: no split
            try:
                t.start()
            finally:
                tracebridge.configure(propagate=True)
            t.join()
        parent()
        self.assertEqual(got, [(2, 4)])
        # parent: meta, >, split (propagate), <; job: 3; ctx.run: 3 (no
        # split: no InvocationRecord)
        recs = self.records(4 + 3 + 3, invocations=2)
        metas, points, joins = self.links(recs)
        root_id = [k for k, v in metas.items() if v[0] == k][0]
        self.assertEqual(sorted(v for k, v in metas.items() if k != root_id), [(root_id, -1), (root_id, 1)])
        self.assertEqual(points, {(root_id, 1): 'SplitEvent'})
        self.assertEqual(joins, {})

    def test_invocation_header_and_continue_from(self):
        got = {}

        @probe
        def call():
            got['header'] = tracebridge.invocation_header()

            def serve():  # "another process": its own thread, no split
                with tracebridge.continue_from(got['header']):
                    leaf(1)
                    leaf(2)  # a second trace of the block: a child too
            t = threading.Thread(target=serve)
            tracebridge.configure(propagate=False)
            try:
                t.start()
            finally:
                tracebridge.configure(propagate=True)
            t.join()
        call()
        self.assertIsNone(tracebridge.invocation_header())  # no open trace
        with tracebridge.continue_from('tb1-not-a-header'):
            leaf(3)
        with tracebridge.continue_from(None):
            leaf(4)
        # call: meta, >, <; the block: two traces of 3; leaf(3), leaf(4): 3 each
        recs = self.records(3 + 6 + 6, invocations=1 + 2)
        node, pid, inv, order = tracebridge.parse_invocation_header(got['header'])
        self.assertEqual((node, pid, order), ('test-host', os.getpid(), 1))
        invs = [r for r in recs if r['type'] == 'InvocationRecord']
        root = [r for r in invs if r['parentInvocationId'] == -1]
        self.assertEqual(len(root), 1)
        self.assertEqual(root[0]['invocationId'], inv)
        children = [r for r in invs if r['parentInvocationId'] != -1]
        self.assertEqual([(r['parentInvocationId'], r['parentOrderId'], r['parentProcessId'], r['parentNodeId'])
                          for r in children], [(inv, 1, os.getpid(), 'test-host')] * 2)
        metas = {r['traceId']: r for r in recs if r['type'] == 'TraceMetadata'}
        for r in children:  # roots for Kieker
            m = metas[r['traceId']]
            self.assertEqual((m['parentTraceId'], m['parentOrderId']), (m['traceId'], -1))
        self.assertEqual(len(metas), 5)
        self.assertEqual(len({r['traceId'] for r in children}), 2)

    def test_header_escapes_the_node(self):
        tracebridge.configure(hostname='web-1 %x')
        try:
            with trace('op', 'c'):
                h = tracebridge.invocation_header()
        finally:
            tracebridge.configure(hostname='test-host')
        self.assertTrue(h.startswith('tb1-web%%2D1%%20%%25x-%d-' % os.getpid()), h)
        self.assertEqual(tracebridge.parse_invocation_header(h)[0], 'web-1 %x')
        self.records(3, invocations=1)

    def test_invocations_off(self):
        tracebridge.configure(invocations=False)
        try:
            @probe
            def parent():
                t = threading.Thread(target=leaf, args=(1,))
                t.start()
                t.join()
                return tracebridge.invocation_header()
            self.assertIsNone(parent())
            with tracebridge.continue_from('tb1-n-1-2-3'):
                leaf(2)
        finally:
            tracebridge.configure(invocations=True)
        # parent: meta, >, split, join, <; child: meta, >, <; leaf(2): a root
        recs = self.records(8 + 3)
        metas, _, _ = self.links(recs, invocations=False)
        self.assertEqual(sorted(p == k for k, (p, _) in metas.items()), [False, True, True])

    def test_disabled_probes_do_not_split(self):
        @probe
        def parent():
            tracebridge.configure(enabled=False)
            try:
                t = threading.Thread(target=leaf, args=(1,))
                t.start()
                t.join()
            finally:
                tracebridge.configure(enabled=True)
        parent()
        recs = self.records(3)
        self.assertEqual([r['type'] for r in recs], ['TraceMetadata', 'BeforeOperationEvent', 'AfterOperationEvent'])


if __name__ == '__main__':
    unittest.main()
