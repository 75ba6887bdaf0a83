"""The tripleo scenario's software figures: its deployments really run by
the simulated servers' agents, counted from the servers' disks.

After the create the bench stops the agent host (it then writes its
requests and peak RSS, simhost.STATS_FILE) and reads every server's
RUNS_LOG: one line per script run. Every deployment ran exactly once when
each "<deployment> <action>" line appears once and there are as many as
the template has deployments.
"""

import collections
import json
import os

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
        path = os.path.join(disks, name, scenarios.RUNS_LOG)
        try:
            with open(path) as f:
                for line in f:
                    if line.strip():
                        seen[(name, line.strip())] += 1
        except (FileNotFoundError, NotADirectoryError):
            continue
    return seen


def agent_stats(disks):
    try:
        with open(os.path.join(disks, simhost.STATS_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


#: the figures of a scenario without deployments
NONE = dict.fromkeys(('script_runs', 'runs_per_s', 'agent_requests',
                      'agent_requests_per_deployment', 'agent_rss_mb',
                      'agent_cpu_s', 'hooks_cpu_s', 'exactly_once'))


def figures(engine, expected, create_s):
    """Stop the agent host and read what the agents did: script runs, runs
    per second of the create, agent requests per deployment, the agent
    host's peak RSS, and whether each deployment ran exactly once."""
    compute = engine.clients.compute
    disks = compute.disks_dir
    compute.shutdown_agents()
    stats = agent_stats(disks) or {}
    requests = sum((stats.get('requests') or {}).values()) or None
    return dict(ran(runs(disks), expected, create_s), **{
        'agent_requests': stats.get('requests'),
        'agent_requests_per_deployment':
            requests / expected if requests and expected else None,
        'agent_rss_mb': stats.get('peak_rss_mb'),
        # CPU seconds of the agent host, and of the hooks it ran
        'agent_cpu_s': stats.get('cpu_s'),
        'hooks_cpu_s': stats.get('hooks_cpu_s'),
    })


def ran(seen, expected, seconds):
    """The figures of the script runs `seen` (runs()): how many, per
    second of `seconds`, and whether each of the `expected` deployments
    ran exactly once."""
    total = sum(seen.values())
    twice = sum(1 for c in seen.values() if c > 1)
    once = 'yes' if twice == 0 and len(seen) == expected else \
        'NO: %d of %d ran, %d more than once' % (len(seen), expected, twice)
    return {'script_runs': total,
            'runs_per_s': total / seconds if seconds else None,
            'exactly_once': once}
