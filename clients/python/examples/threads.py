#!/usr/bin/env python3
"""One trace across threads, a thread pool and asyncio tasks: a shop whose
requests search the catalogue on two threads, price the items on a
ThreadPoolExecutor, and notify the customer from two asyncio tasks that have
each notification audited on a worker thread (asyncio.to_thread). Only
@probe is in the code: tracebridge records a SplitEvent where the request
starts a thread, submits work or creates a task, and the work's calls form
child traces linked to it, so each request is ONE call tree.

    python3 examples/threads.py [REQUESTS]

sends to TRACEBRIDGE_HOST:TRACEBRIDGE_PORT (default 127.0.0.1:10133). The
program keeps its own account of the calls it made, independent of
tracebridge (every call is handed the path of calls above it, across
threads and tasks, as an argument), and prints one line per call,

    call REQ PATH OUTCOME

tab-separated, where PATH is the operations from the request's first call
down to this one joined by " | " and OUTCOME "ok" or "failed", then the
writer's counters as "stats {json}". End-to-end tests compare these lines
with the trees the bridge's trace assembler builds from the log.
"""

import asyncio
import functools
import inspect
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import tracebridge  # noqa: E402
from tracebridge import probe  # noqa: E402

# ---- the program's own account of its calls (not part of tracebridge) ----

_lock = threading.Lock()
_lines = []


def account(func):
    """Records each call of func with the path it was handed (keyword
    argument path) and hands the path below it on to func."""
    op = tracebridge.signature(func)[0]

    def start(kwargs):
        path = kwargs.pop('path') + (op,)
        with _lock:
            i = len(_lines)
            _lines.append(None)
        return path, i

    def end(i, req, path, failed):
        with _lock:
            _lines[i] = '\t'.join(['call', str(req), ' | '.join(path), 'failed' if failed else 'ok'])

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def awrapper(self, req, *args, **kwargs):
            path, i = start(kwargs)
            try:
                r = await func(self, req, *args, path=path, **kwargs)
            except BaseException:
                end(i, req, path, True)
                raise
            end(i, req, path, False)
            return r
        return awrapper

    @functools.wraps(func)
    def wrapper(self, req, *args, **kwargs):
        path, i = start(kwargs)
        try:
            r = func(self, req, *args, path=path, **kwargs)
        except BaseException:
            end(i, req, path, True)
            raise
        end(i, req, path, False)
        return r
    return wrapper

# ---- the shop ----


class OutOfStock(Exception):
    pass


class Shop(object):
    def __init__(self, pool):
        self.pool = pool

    @probe
    @account
    def handle(self, req, path):
        # Two threads search the catalogue.
        ts = [threading.Thread(target=self.search, args=(req, 2), kwargs={'path': path}) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        # The pool prices the items; one is out of stock for even requests.
        items = ['book', 'pen', 'ink' if req % 2 else 'gold']
        prices = []
        for f in [self.pool.submit(self.price, req, item, path=path) for item in items]:
            try:
                prices.append(f.result())
            except OutOfStock:
                pass
        # Two asyncio tasks notify, each auditing on a worker thread.
        asyncio.run(self.notify_all(req, path=path))
        return sum(prices)

    @probe
    @account
    def search(self, req, depth, path):
        if depth > 1:
            self.search(req, depth - 1, path=path)
            self.search(req, depth - 1, path=path)

    @probe
    @account
    def price(self, req, item, path):
        if item == 'gold':
            raise OutOfStock(item)
        return len(item)

    @probe
    @account
    async def notify_all(self, req, path):
        await asyncio.gather(self.notify(req, 'mail', path=path), self.notify(req, 'sms', path=path))

    @probe
    @account
    async def notify(self, req, channel, path):
        await asyncio.sleep(0.001)
        if hasattr(asyncio, 'to_thread'):  # Python 3.9+
            await asyncio.to_thread(self.audit, req, channel, path=path)
        else:
            await asyncio.get_event_loop().run_in_executor(
                None, functools.partial(self.audit, req, channel, path=path))

    @probe
    @account
    def audit(self, req, channel, path):
        return channel


def main():
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with ThreadPoolExecutor(2) as pool:
        shop = Shop(pool)
        for req in range(1, requests + 1):
            shop.handle(req, path=())
    for line in _lines:
        print(line)
    tracebridge.shutdown()
    print('stats ' + json.dumps(tracebridge.stats(), sort_keys=True))


if __name__ == '__main__':
    main()
