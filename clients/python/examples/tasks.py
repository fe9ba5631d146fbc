#!/usr/bin/env python3
"""Invocation identifiers: work handed to a pooled thread, and work another
process does on behalf of a call, end up in the caller's call tree.

    python3 examples/tasks.py pool [JOBS] [--node NODE]
    python3 examples/tasks.py caller [REQUESTS] [--node NODE]

In pool mode, a ThreadPoolExecutor with ONE worker thread, started before
any trace and reused for every job, runs the jobs a trace submits:
pool.Dispatcher.run calls pool.Dispatcher.submit for each job, which hands
it to the pool (the hook records the split and the creating invocation
there); the worker runs pool.Worker.work → pool.Worker.step.

In caller mode, each request is a trace rpc.Client.call that runs this
program again as the callee (another process, with --node set to this
node's name plus "-callee"), passing tracebridge.invocation_header() in
the environment variable TRACEBRIDGE_INVOCATION; the callee runs
rpc.Server.handle → rpc.Server.lookup inside
tracebridge.continue_from(header).

It sends to TRACEBRIDGE_HOST:TRACEBRIDGE_PORT (default 127.0.0.1:10133) and
prints, per process, the path of every call it makes across threads and
processes ("path OP | OP | ...@NODE", the program's own account, handed
down as arguments) and the writer's counters ("stats {json}").
"""

import argparse
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import tracebridge  # noqa: E402
from tracebridge import probe  # noqa: E402

ENV_INVOCATION = 'TRACEBRIDGE_INVOCATION'

_lock = threading.Lock()
_node = [None]


def note(prefix, op):
    """Prints the path of a call of op below prefix and returns it."""
    path = prefix + ' | ' + op if prefix else op
    with _lock:
        print('path %s@%s' % (path, _node[0]))
        sys.stdout.flush()
    return path


# ---- a pool ----

@probe(operation='pool.Worker.step', cls='pool.Worker')
def step(prefix):
    note(prefix, 'pool.Worker.step')


@probe(operation='pool.Worker.work', cls='pool.Worker')
def work(job, prefix):
    step(note(prefix, 'pool.Worker.work'))
    return job


class Dispatcher(object):

    def __init__(self, pool):
        self.pool = pool
        self.futures = []

    @probe(operation='pool.Dispatcher.submit', cls='pool.Dispatcher')
    def submit(self, job, prefix):
        path = note(prefix, 'pool.Dispatcher.submit')
        self.futures.append(self.pool.submit(work, job, path))  # the job is created here

    @probe(operation='pool.Dispatcher.run', cls='pool.Dispatcher')
    def run(self, jobs):
        path = note('', 'pool.Dispatcher.run')
        for j in range(jobs):
            self.submit(j, path)
        return [f.result() for f in self.futures]


def run_pool(jobs):
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: None).result()  # the worker thread, started outside any trace
        workers = set()
        pool.submit(lambda: workers.add(threading.get_ident())).result()
        Dispatcher(pool).run(jobs)
        pool.submit(lambda: workers.add(threading.get_ident())).result()
        assert len(workers) == 1, workers


# ---- across processes ----

@probe(operation='rpc.Server.lookup', cls='rpc.Server')
def lookup(prefix):
    note(prefix, 'rpc.Server.lookup')


@probe(operation='rpc.Server.handle', cls='rpc.Server')
def handle(prefix):
    lookup(note(prefix, 'rpc.Server.handle'))


@probe(operation='rpc.Client.call', cls='rpc.Client')
def call(n):
    path = note('', 'rpc.Client.call')
    env = dict(os.environ)
    env[ENV_INVOCATION] = tracebridge.invocation_header()
    r = subprocess.run([sys.executable, os.path.abspath(__file__), 'callee', '--node', _node[0] + '-callee',
                        '--prefix', path], env=env, stdout=subprocess.PIPE, check=True)
    with _lock:
        sys.stdout.write(r.stdout.decode('utf-8'))
        sys.stdout.flush()
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('mode', choices=['pool', 'caller', 'callee'])
    ap.add_argument('count', nargs='?', type=int, default=3)
    ap.add_argument('--node', default=None)
    ap.add_argument('--prefix', default='')
    a = ap.parse_args()
    if a.node:
        tracebridge.configure(hostname=a.node)
    import socket
    _node[0] = a.node or socket.gethostname()
    if a.mode == 'pool':
        run_pool(a.count)
    elif a.mode == 'caller':
        for n in range(a.count):
            call(n)
    else:
        with tracebridge.continue_from(os.environ.get(ENV_INVOCATION)):
            handle(a.prefix)
    tracebridge.flush(10)
    with _lock:
        print('stats ' + json.dumps(tracebridge.stats(), sort_keys=True))
        sys.stdout.flush()


if __name__ == '__main__':
    main()
