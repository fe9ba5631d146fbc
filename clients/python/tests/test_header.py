"""Invocation headers: the format the Go and C clients share (the same
vectors as probe/invocation_test.go and clients/c/tests/unit.c)."""

import random
import unittest

from tracebridge.header import MAX_NODE, format_header, parse_header


class HeaderTest(unittest.TestCase):

    def test_format_and_parse(self):
        for node, pid, inv, order, want in [
            ('web-1', 4242, 7, 3, 'tb1-web%2D1-4242-7-3'),
            ('a%b', 1, 1, 0, 'tb1-a%25b-1-1-0'),
            ('host.example.org', 2147483647, 9223372036854775807, 2147483647,
             'tb1-host.example.org-2147483647-9223372036854775807-2147483647'),
            ('nöde x', 0, 1, 0, 'tb1-n%C3%B6de%20x-0-1-0'),
            ('', 5, 6, 7, 'tb1--5-6-7'),
        ]:
            self.assertEqual(format_header(node, pid, inv, order), want)
            self.assertEqual(parse_header(want), (node, pid, inv, order))
        self.assertEqual(parse_header('tb1-%61%2db-1-2-3'), ('a-b', 1, 2, 3))
        self.assertIsNone(format_header('x' * (MAX_NODE + 1), 1, 1, 1))
        self.assertIsNone(format_header('x', -1, 1, 1))
        longest = format_header('-' * MAX_NODE, 2147483647, 9223372036854775807, 2147483647)
        self.assertEqual(len(longest), 811)
        self.assertEqual(parse_header(longest)[0], '-' * MAX_NODE)

    def test_not_headers(self):
        for bad in ['', 'tb1', 'tb1-', 'tb2-a-1-2-3', 'tb1-a-1-2', 'tb1-a-1-2-3-4', 'tb1-a-1-2-', 'tb1-a--2-3',
                    'tb1-a-+1-2-3', 'tb1-a-1-2-x', 'tb1-a-2147483648-1-1', 'tb1-a-1-9223372036854775808-1',
                    'tb1-a-1-1-2147483648', 'tb1-%-1-2-3', 'tb1-%4-1-2-3', 'tb1-%zz-1-2-3', 'TB1-a-1-2-3',
                    'tb1-a-1-2-99999999999999999999', 'tb1-a-1-2-٣',
                    'tb1-' + 'x' * (MAX_NODE + 1) + '-1-2-3', 'tb1-' + '%2D' * (MAX_NODE + 1) + '-1-2-3',
                    None, b'tb1-a-1-2-3', 42]:
            self.assertIsNone(parse_header(bad), bad)

    def test_mutations_round_trip(self):
        rnd = random.Random(7)
        alphabet = 'tb1-%2D0123456789aAfFzZ\x80é '
        for i in range(20000):
            s = list('tb1-n%%2Dx-%d-%d-%d' % (i, i * 7, i % 13))
            for _ in range(3):
                at = rnd.randrange(len(s) + 1)
                if at < len(s) and rnd.random() < 0.5:
                    s[at] = rnd.choice(alphabet)
                elif at < len(s):
                    del s[at]
                else:
                    s.append(rnd.choice(alphabet))
            h = parse_header(''.join(s))
            if h is None:
                continue
            again = format_header(*h)
            self.assertEqual(parse_header(again), h, (''.join(s), again))


if __name__ == '__main__':
    unittest.main()
