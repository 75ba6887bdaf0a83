"""The tripleo scenario's software figures: its deployments really run by
the simulated servers' agents, counted from the servers' disks.

After the create the bench stops the agent host (it then writes its
requests and peak RSS, simhost.STATS_FILE) and reads every server's
RUNS_LOG: one line per script run (on the disk itself for converge-agent's
servers, under rootfs/var/lib for image heat-agents', whose heat-config
runs scripts in the server's root: scenarios.RUNS_LOGS). Every deployment
ran exactly once when each "<deployment> <action>" line appears once and
there is one for each of the template's deployments: each deployment's
count is in the row (`deployment_runs`), and how many deployments ran how
many times (`run_counts`). For heat-agents servers, heat-config's own
record of each deployment it ran (rootfs/var/lib/heat-config/deployed/
<id>.notify.json, written once it signalled) is counted too
(`heat_config_deployed`).

While the create runs, the machine's memory in use and load average are
sampled (`Sampler`): a heat-agents server's os-collect-config is a
process of its own (about 48 MB), outside the agent host's RSS.
"""

import collections
import json
import os
import threading

from converge.agent import simhost
from converge.bench import scenarios


def runs(disks):
    """{(server dir, line): count} of every script run on every disk."""
    seen = collections.Counter()
    try:
        names = os.listdir(disks)
    except FileNotFoundError:
        return seen
    for name in names:
        for log in scenarios.RUNS_LOGS:
            path = os.path.join(disks, name, log)
            try:
                with open(path) as f:
                    for line in f:
                        if line.strip():
                            seen[(name, line.strip())] += 1
            except (FileNotFoundError, NotADirectoryError):
                continue
    return seen


#: heat-config's record, on a heat-agents server's disk, of the
#: deployments it ran and signalled
DEPLOYED = os.path.join('rootfs', 'var', 'lib', 'heat-config', 'deployed')


def heat_config_deployed(disks):
    """How many deployments heat-config recorded as run and signalled on
    every disk (None when no disk has heat-config's records)."""
    total, found = 0, False
    try:
        names = os.listdir(disks)
    except FileNotFoundError:
        return None
    for name in names:
        try:
            records = os.listdir(os.path.join(disks, name, DEPLOYED))
        except (FileNotFoundError, NotADirectoryError):
            continue
        found = True
        total += sum(1 for r in records if r.endswith('.notify.json'))
    return total if found else None


def per_deployment(seen, names, action='CREATE'):
    """{deployment: runs} of each of `names` for `action`, from the runs
    `seen` (runs()): 0 for one that did not run; a line of a deployment
    not in `names` is kept under its own name."""
    counts = {name: 0 for name in names}
    for (_server, line), count in seen.items():
        parts = line.split()
        if len(parts) == 2 and parts[1] == action:
            counts[parts[0]] = counts.get(parts[0], 0) + count
    return counts


def run_counts(counts):
    """{runs: deployments that ran that many times} of per_deployment's
    `counts`, as text keys (JSON's), fewest runs first."""
    hist = collections.Counter(counts.values())
    return {str(k): hist[k] for k in sorted(hist)}


def run_counts_text(hist):
    """run_counts as the table prints it: "runs x deployments", e.g.
    "1x1800" (all once) or "0x3,1x1797"."""
    if not hist:
        return None
    return ','.join('%sx%d' % kv for kv in hist.items())


class Sampler:
    """The machine's memory in use (MemTotal - MemAvailable) and its
    1-minute load average, read every `interval` seconds in a thread of
    its own until stopped: their peaks, and the memory in use before."""

    def __init__(self, interval=1.0):
        self.interval = interval
        self._stop = threading.Event()
        self.base_mb = used_mb()
        self.peak_mb = self.base_mb
        self.load_max = load()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='bench-sampler')
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self):
        mb, la = used_mb(), load()
        if mb is not None and (self.peak_mb is None or mb > self.peak_mb):
            self.peak_mb = mb
        if la is not None and (self.load_max is None or la > self.load_max):
            self.load_max = la

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._sample()
        return {
            'mem_used_peak_mb': self.peak_mb,
            'mem_added_peak_mb': self.peak_mb - self.base_mb
            if self.peak_mb is not None and self.base_mb is not None
            else None,
            'load_max': self.load_max}


def used_mb(path='/proc/meminfo'):
    try:
        with open(path) as f:
            info = dict(line.split(':', 1) for line in f)
        total = int(info['MemTotal'].split()[0])
        avail = int(info['MemAvailable'].split()[0])
    except (OSError, KeyError, ValueError):
        return None
    return (total - avail) / 1024.0


def load():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def agent_stats(disks):
    try:
        with open(os.path.join(disks, simhost.STATS_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


#: the figures of a scenario without deployments
NONE = dict.fromkeys(('script_runs', 'runs_per_s', 'agent_requests',
                      'agent_requests_per_deployment', 'agent_rss_mb',
                      'agent_cpu_s', 'hooks_cpu_s', 'exactly_once',
                      'deployment_runs', 'run_counts', 'run_counts_text',
                      'heat_config_deployed', 'image', 'transport',
                      'mem_used_peak_mb', 'mem_added_peak_mb', 'load_max'))


def figures(engine, expected, create_s, names=()):
    """Stop the agent host and read what the agents did: script runs, runs
    per second of the create, agent requests per deployment, the agent
    host's peak RSS, and whether each deployment ran exactly once (each
    of `names`' runs, when given)."""
    compute = engine.clients.compute
    disks = compute.disks_dir
    compute.shutdown_agents()
    stats = agent_stats(disks) or {}
    requests = sum((stats.get('requests') or {}).values()) or None
    return dict(ran(runs(disks), expected, create_s, names), **{
        'heat_config_deployed': heat_config_deployed(disks),
        'agent_requests': stats.get('requests'),
        'agent_requests_per_deployment':
            requests / expected if requests and expected else None,
        'agent_rss_mb': stats.get('peak_rss_mb'),
        # CPU seconds of the agent host, and of the hooks it ran
        'agent_cpu_s': stats.get('cpu_s'),
        'hooks_cpu_s': stats.get('hooks_cpu_s'),
    })


def ran(seen, expected, seconds, names=()):
    """The figures of the script runs `seen` (runs()): how many, per
    second of `seconds`, and whether each of the `expected` deployments
    ran exactly once; with their `names`, each one's CREATE runs
    (`deployment_runs`, 0 for one that never ran) and how many ran how
    many times (`run_counts`)."""
    total = sum(seen.values())
    twice = sum(1 for c in seen.values() if c > 1)
    out = {'script_runs': total,
           'runs_per_s': total / seconds if seconds else None}
    if names:
        counts = per_deployment(seen, names)
        hist = run_counts(counts)
        out.update(deployment_runs=counts, run_counts=hist,
                   run_counts_text=run_counts_text(hist))
        ok = twice == 0 and set(hist) == {'1'} and len(counts) == expected
        wrong = ['%s ran %d' % (n, c) for n, c in sorted(counts.items())
                 if c != 1]
        once = 'yes' if ok else 'NO: %d of %d not once (%s%s)' % (
            len(wrong), len(counts), ', '.join(wrong[:3]),
            ', ...' if len(wrong) > 3 else '')
    else:
        once = 'yes' if twice == 0 and len(seen) == expected else \
            'NO: %d of %d ran, %d more than once' % (len(seen), expected,
                                                     twice)
    out['exactly_once'] = once
    return out
