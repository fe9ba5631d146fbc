#!/usr/bin/env python3
"""MooBench-style overhead benchmark of the tracebridge Python client.

A method that recurses to depth 10 (MooBench's monitoredMethod with no busy
time) is called N times in three configurations, each in a fresh
interpreter:

    none      no instrumentation
    disabled  @probe on every level, probes switched off
    enabled   @probe on every level, records sent to a running bridge

and the time per top-level call (10 method executions; 21 records when
enabled: 20 events and the TraceMetadata) is printed. Usage (the bridge must listen for "enabled"):

    python3 bench/moobench.py [--calls N] [--depth D] [--mode none|disabled|enabled|all]

Each mode runs a warm-up of N/10 calls first, then N measured calls, and
for "enabled" waits until every record has been sent (the flush time is
part of the measurement: records the writer still holds are not free).
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))


def run_mode(mode, calls, depth):
    import tracebridge
    from tracebridge import probe

    def plain(d):
        if d > 1:
            return plain(d - 1)
        return d

    @probe
    def probed(d):
        if d > 1:
            return probed(d - 1)
        return d

    if mode == 'none':
        fn = plain
    else:
        fn = probed
        tracebridge.configure(enabled=(mode == 'enabled'), max_queue=4000000, report_drops=False)
    for _ in range(max(1, calls // 10)):
        fn(depth)
    if mode == 'enabled':
        tracebridge.flush(30)
    before = tracebridge.stats()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn(depth)
    if mode == 'enabled':
        tracebridge.flush(60)
    took = time.perf_counter_ns() - t0
    s = tracebridge.stats()
    return {'mode': mode, 'calls': calls, 'depth': depth,
            'ns_per_call': round(took / calls, 1),
            'ns_per_method': round(took / calls / depth, 1),
            'records_sent': s['sent'] - before['sent'],
            'records_dropped': s['dropped'] - before['dropped'],
            'python': sys.version.split()[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--calls', type=int, default=200000)
    ap.add_argument('--depth', type=int, default=10)
    ap.add_argument('--mode', default='all', choices=['none', 'disabled', 'enabled', 'all'])
    a = ap.parse_args()
    if a.mode != 'all':
        print(json.dumps(run_mode(a.mode, a.calls, a.depth)))
        return
    base = None
    for mode in ('none', 'disabled', 'enabled'):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), '--mode', mode,
                              '--calls', str(a.calls), '--depth', str(a.depth)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        base = base or r['ns_per_call']
        print('%-9s %10.1f ns/call  %8.1f ns/method  x%-6.2f sent %d dropped %d' % (
            mode, r['ns_per_call'], r['ns_per_method'], r['ns_per_call'] / base,
            r['records_sent'], r['records_dropped']))


if __name__ == '__main__':
    main()
