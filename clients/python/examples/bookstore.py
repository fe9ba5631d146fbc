#!/usr/bin/env python3
"""A small bookstore traced with tracebridge: a call tree with a failing
call that is caught, one that is not, a block traced with trace(), and a
second thread with its own trace.

    python3 examples/bookstore.py [ROUNDS]

sends to TRACEBRIDGE_HOST:TRACEBRIDGE_PORT (default 127.0.0.1:10133). The
program keeps its own account of the calls it made, independent of
tracebridge, and prints one line per trace,

    expect >op >op <op !op <op ...

(">" a call, "<" its return, "!" its exception, op the operationSignature),
then the writer's counters as "stats {json}". End-to-end tests compare
these lines with the records the bridge logged.
"""

import functools
import json
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import tracebridge  # noqa: E402
from tracebridge import probe, trace  # noqa: E402

# ---- the example's own account of its calls (not part of tracebridge) ----

_lock = threading.Lock()
_traces = []
_local = threading.local()


def _event(ev):
    calls = getattr(_local, 'calls', None)
    if calls is None:
        calls = _local.calls = []
        _local.depth = 0
    calls.append(ev)
    _local.depth += 1 if ev[0] == '>' else -1
    if _local.depth == 0:
        with _lock:
            _traces.append(' '.join(calls))
        _local.calls = None


def expect(func=None, operation=None):
    if func is None:
        return lambda f: expect(f, operation)
    op = operation or tracebridge.signature(func)[0]

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        _event('>' + op)
        try:
            r = func(*args, **kwargs)
        except BaseException:
            _event('!' + op)
            raise
        _event('<' + op)
        return r
    return wrapper


class expect_block(object):
    def __init__(self, op):
        self.op = op

    def __enter__(self):
        _event('>' + self.op)

    def __exit__(self, exc_type, exc, tb):
        _event(('!' if exc_type else '<') + self.op)
        return False

# ---- the bookstore ----


class Catalog(object):
    def __init__(self):
        self.books = {'0-13-110362-8': 'The C Programming Language',
                      '0-201-63361-2': 'Design Patterns',
                      '3-540-43081-4': 'Software Engineering'}

    @probe
    @expect
    def get_book(self, isbn):
        if isbn not in self.books:
            raise KeyError(isbn)
        return self.books[isbn]


class CRM(object):
    def __init__(self, catalog):
        self.catalog = catalog

    @probe
    @expect
    def get_offers(self, favourites):
        return [self.catalog.get_book(isbn) for isbn in favourites]


class Bookstore(object):
    def __init__(self):
        self.catalog = Catalog()
        self.crm = CRM(self.catalog)

    @probe
    @expect
    def search_book(self, isbn):
        book = self.catalog.get_book(isbn)
        self.crm.get_offers(['0-201-63361-2'])
        return book

    @probe
    @expect
    def lookup(self, isbn):
        try:
            return self.catalog.get_book(isbn)
        except KeyError:
            return None

    def checkout(self, cart, limit):
        op = 'bookstore.Bookstore.checkout'
        with trace(op, 'bookstore.Bookstore'), expect_block(op):
            total = 0
            for isbn in cart:
                self.catalog.get_book(isbn)
                total += 30
            self.charge(total, limit)

    @probe(operation='bookstore.Payment.charge', cls='bookstore.Payment')
    @expect(operation='bookstore.Payment.charge')
    def charge(self, amount, limit):
        if amount > limit:
            raise ValueError('card declined: %d over the limit %d' % (amount, limit))


@probe
@expect
def serve_customer(store):
    store.search_book('0-13-110362-8')
    store.lookup('9-999-99999-9')            # a failing call, caught
    store.checkout(['0-201-63361-2'], limit=100)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    store = Bookstore()
    for _ in range(rounds):
        serve_customer(store)
        store.search_book('3-540-43081-4')
        try:
            store.checkout(['0-201-63361-2', '3-540-43081-4'], limit=50)  # fails, not caught
        except ValueError:
            pass
        worker = threading.Thread(target=store.search_book, args=('0-201-63361-2',))
        worker.start()
        worker.join()
    for t in _traces:
        print('expect ' + t)
    tracebridge.shutdown()
    print('stats ' + json.dumps(tracebridge.stats(), sort_keys=True))


if __name__ == '__main__':
    main()
