"""Encoding tests: hand-computed frames and a golden stream written by
tracebridge's Go encoder (testdata/golden.bin, from testdata/golden.json;
regenerate with `go test ./clients/python -run TestGolden -update`)."""

import json
import os
import struct
import unittest

from tracebridge import kieker
from tests.support import decode

HERE = os.path.dirname(os.path.abspath(__file__))

KINDS = {'TraceMetadata': kieker.META, 'BeforeOperationEvent': kieker.BEFORE,
         'AfterOperationEvent': kieker.AFTER, 'AfterOperationFailedEvent': kieker.FAILED}


def as_tuple(r):
    k = KINDS[r['type']]
    if k == kieker.META:
        return (k, -1, r['traceId'], r['threadId'], r['sessionId'], r['hostname'],
                r['parentTraceId'], r['parentOrderId'])
    t = (k, r['timestamp'], r['traceId'], r['orderIndex'], r['operationSignature'], r['classSignature'])
    if k == kieker.FAILED:
        t += (r['cause'],)
    return t


def entry(i, s):
    b = s.encode('utf-8')
    return struct.pack('>iii', -1, i, len(b)) + b


class EncodingTest(unittest.TestCase):

    def test_before_event_by_hand(self):
        buf = bytearray()
        reg = kieker.Registry()
        kieker.append_operation_event(buf, reg, kieker.BEFORE, 1000, 42, 0, 'm.f', 'm')
        want = (entry(0, kieker.BEFORE_OPERATION_EVENT) + entry(1, 'm.f') + entry(2, 'm') +
                struct.pack('>i', 0) + struct.pack('>q', -1) + struct.pack('>q', 1000) +
                struct.pack('>q', 42) + struct.pack('>i', 0) + struct.pack('>ii', 1, 2))
        self.assertEqual(bytes(buf), want)
        # The same strings again: no new entries, the same ids.
        buf2 = bytearray()
        kieker.append_operation_event(buf2, reg, kieker.AFTER, 1001, 42, 1, 'm.f', 'm')
        self.assertEqual(bytes(buf2), entry(3, kieker.AFTER_OPERATION_EVENT) +
                         struct.pack('>iqqqiii', 3, -1, 1001, 42, 1, 1, 2))

    def test_concurrency_events_by_hand(self):
        buf = bytearray()
        reg = kieker.Registry()
        kieker.append_concurrency_event(buf, reg, kieker.SPLIT, 1000, 42, 3)
        kieker.append_concurrency_event(buf, reg, kieker.JOIN, 1001, 42, 4, joined_trace_id=43,
                                        logging_timestamp=1001)
        want = (entry(0, kieker.SPLIT_EVENT) + struct.pack('>iqqqi', 0, -1, 1000, 42, 3) +
                entry(1, kieker.JOIN_EVENT) + struct.pack('>iqqqiq', 1, 1001, 1001, 42, 4, 43))
        self.assertEqual(bytes(buf), want)
        # The same as queued tuples through append_records.
        buf2 = bytearray()
        n = kieker.append_records(buf2, kieker.Registry(), [(kieker.SPLIT, 1000, 42, 3),
                                                             (kieker.JOIN, 1001, 42, 4, 43)])
        self.assertEqual(n, 2)
        self.assertEqual(bytes(buf2), want.replace(struct.pack('>iqq', 1, 1001, 1001), struct.pack('>iqq', 1, -1, 1001)))
        recs, _ = decode(bytes(buf))
        self.assertEqual([(r['type'], r['orderIndex'], r.get('joinedTraceId')) for r in recs],
                         [('SplitEvent', 3, None), ('JoinEvent', 4, 43)])
        with self.assertRaises(ValueError):
            kieker.append_concurrency_event(buf, reg, kieker.BEFORE, 1, 2, 3)

    def test_trace_metadata_by_hand(self):
        buf = bytearray()
        reg = kieker.Registry()
        kieker.append_trace_metadata(buf, reg, 7, 8, 's', 'h', 7, -1, logging_timestamp=5)
        want = (entry(0, kieker.TRACE_METADATA) + entry(1, 's') + entry(2, 'h') +
                bytes.fromhex('00000000' '0000000000000005' '0000000000000007' '0000000000000008'
                              '00000001' '00000002' '0000000000000007' 'ffffffff'))
        self.assertEqual(bytes(buf), want)

    def test_failed_event_and_logging_timestamp(self):
        buf = bytearray()
        reg = kieker.Registry()
        kieker.append_operation_event(buf, reg, kieker.FAILED, 9, 1, 3, 'op', 'c', cause='boom',
                                      logging_timestamp=77)
        recs, strings = decode(bytes(buf))
        self.assertEqual(recs, [{'type': 'AfterOperationFailedEvent', 'lts': 77, 'timestamp': 9,
                                 'traceId': 1, 'orderIndex': 3, 'operationSignature': 'op',
                                 'classSignature': 'c', 'cause': 'boom'}])
        self.assertEqual(strings, {0: kieker.AFTER_OPERATION_FAILED_EVENT, 1: 'op', 2: 'c', 3: 'boom'})

    def test_invocation_record_by_hand(self):
        buf = bytearray()
        reg = kieker.Registry()
        kieker.append_invocation_record(buf, reg, 1000, 9, 4242, 'node-b', 77, 8, 4141, 'nöde-a', 5, 42)
        want = (entry(0, kieker.INVOCATION_RECORD) + entry(1, 'node-b') + entry(2, 'nöde-a') +
                struct.pack('>iqqiiqqqiiiq', 0, -1, 9, 4242, 1, 77, 1000, 8, 4141, 2, 5, 42))
        self.assertEqual(bytes(buf), want)
        recs, _ = decode(bytes(buf))
        self.assertEqual(recs[0]['type'], 'InvocationRecord')
        self.assertEqual((recs[0]['nodeId'], recs[0]['parentNodeId'], recs[0]['creationTime']), ('node-b', 'nöde-a', 1000))
        # As a queued tuple, with the creation time as logging timestamp.
        buf2 = bytearray()
        item = (kieker.INV, 1000, 9, 4242, 'node-b', 77, 8, 4141, 'nöde-a', 5, 42)
        self.assertEqual(kieker.append_records(buf2, kieker.Registry(), [item], logging_timestamps=True), 1)
        self.assertEqual(bytes(buf2), want[:len(want) - 72 + 4] + struct.pack('>q', 1000) + want[len(want) - 72 + 12:])
        # Out-of-range numbers wrap as in Java.
        buf3 = bytearray()
        big = (kieker.INV, 1 << 64, 1 << 63, 1 << 31, 'n', 1 << 63, -1, 1 << 32, 'p', -1, (1 << 64) + 3)
        self.assertEqual(kieker.append_records(buf3, kieker.Registry(), [big]), 1)
        r = decode(bytes(buf3))[0][0]
        self.assertEqual((r['invocationId'], r['processId'], r['creationTime'], r['parentProcessId'], r['traceId']),
                         (-(1 << 63), -(1 << 31), 0, 0, 3))

    def test_utf8_byte_lengths(self):
        for s, n in [('a', 1), ('ü', 2), ('书', 3), ('🐍', 4), ('', 0)]:
            with self.subTest(s=s):
                buf = bytearray()
                kieker.Registry().id(buf, s)
                self.assertEqual(struct.unpack_from('>iii', buf), (-1, 0, n))
                self.assertEqual(len(buf), 12 + n)

    def test_odd_strings(self):
        for s, want in [(None, b''), (12, b'12'), ('\udc80x', b'\\udc80x'),
                        ('ü' * kieker.MAX_STRING, 'ü'.encode() * (kieker.MAX_STRING // 2))]:
            with self.subTest(s=repr(s)[:20]):
                self.assertEqual(kieker.utf8(s), want)

    def test_integers_wrap_like_java(self):
        buf = bytearray()
        reg = kieker.Registry()
        n = kieker.append_records(buf, reg, [(kieker.BEFORE, 1 << 64, -1, (1 << 31) + 5, 'o', 'c')])
        self.assertEqual(n, 1)
        recs, _ = decode(bytes(buf))
        self.assertEqual((recs[0]['timestamp'], recs[0]['traceId'], recs[0]['orderIndex']),
                         (0, -1, -(1 << 31) + 5))

    def test_malformed_tuples_are_skipped(self):
        buf = bytearray()
        reg = kieker.Registry()
        items = [(kieker.BEFORE, 1, 2, 3, 'o', 'c'), (99,), (kieker.AFTER, 'x', 2, 3, 'o', 'c'), (),
                 (kieker.AFTER, 2, 2, 4, 'o', 'c')]
        self.assertEqual(kieker.append_records(buf, reg, items), 2)
        recs, _ = decode(bytes(buf))
        self.assertEqual([r['orderIndex'] for r in recs], [3, 4])
        with self.assertRaises(ValueError):
            kieker.append_operation_event(bytearray(), reg, kieker.META, 1, 2, 3, 'o', 'c')

    def test_golden_stream_from_go(self):
        with open(os.path.join(HERE, 'testdata', 'golden.json'), encoding='utf-8') as f:
            spec = json.load(f)
        with open(os.path.join(HERE, 'testdata', 'golden.bin'), 'rb') as f:
            golden = f.read()
        buf = bytearray()
        n = kieker.append_records(buf, kieker.Registry(), [as_tuple(r) for r in spec])
        self.assertEqual(n, len(spec))
        self.assertEqual(bytes(buf).hex(), golden.hex())
        # And the independent decoder reads back what the spec says.
        recs, _ = decode(golden)
        for r in recs:
            self.assertEqual(r.pop('lts'), -1)
        self.assertEqual(recs, spec)


if __name__ == '__main__':
    unittest.main()
