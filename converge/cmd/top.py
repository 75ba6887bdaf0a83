"""`converge top`: what the engine is doing now, refreshed every second.

A terminal view (the standard library's curses) of one snapshot of the
service layer's `engine_activity` at a time: the traversals running with
their progress and rate, the waits coming due, the engines and their
units in flight, the units running longest and the slowest actions that
just ended. Embedded it reads the home's database (the engine is whichever
`converge` command runs the traversal); with --os-url it asks converge-api.
`q` quits. Without a terminal (or with --once) it prints one snapshot.

Rendering (`render`) is a pure function of a snapshot and the screen's
size, so what the user sees is the same text in both modes.
"""

import curses
import locale
import sys
import time

from cliff import command

from converge import exception
from converge.cmd import progress

#: width of the progress bar, inside its brackets
BAR = 20
#: seconds between two looks at the keyboard while waiting to refresh
KEY_POLL = 0.1


def _seconds(value):
    """A wait's time to come: `in 1.2 s`, or how late it is."""
    if value < 0:
        return 'late %.1f s' % -value
    return 'in %.1f s' % value


def _heads(heads):
    """Column heads after STACK and RESOURCE, over the columns they head:
    ACTION (8), a time (9, right), the rest as they come."""
    widths = {'ACTION': '%-8s', 'FOR': '%9s ', 'TOOK': '%9s ',
              'STATUS': ' %-8s'}
    return ' '.join(widths.get(h, '%s') % h for h in heads)


def bar(done, total):
    filled = int(BAR * done / total) if total else 0
    return '[%s%s]' % ('#' * filled, '.' * (BAR - filled))


def _stack(entry, indent=0):
    return '  ' * indent + str(entry.get('stack_name') or
                               entry.get('stack_id') or '')


def render(snap, width=None, height=None, source=''):
    """The lines of the screen for the snapshot `snap` (the service's
    engine_activity), each cut to `width` if given; `height` lines if
    given (the last says how to quit)."""
    now = snap['time']
    scope = ('all projects' if snap.get('project') is None
             else 'project %s' % snap['project'])
    travs = snap['traversals']
    lines = [
        'converge top  %s  %s  %s' % (
            scope, source, time.strftime('%H:%M:%S', time.localtime(now))),
        '%d traversal%s running  %.1f nodes/s  ready %d  waiting %d '
        '(%d due in %g s, %d late)  in flight %d' % (
            len(travs), '' if len(travs) == 1 else 's', snap['rate'],
            sum(t['ready'] for t in travs), snap['waiting'],
            snap['waits_due'], snap['due_within'], snap['waits_late'],
            sum(e['in_flight'] for e in snap['engines'])),
        '',
        '%-28s %-8s %-8s %11s %-*s %7s %6s %6s %8s' % (
            'STACK', 'ACTION', 'STATE', 'DONE/TOTAL', BAR + 2, 'PROGRESS',
            'NODES/S', 'READY', 'WAIT', 'ELAPSED')]
    if not travs:
        lines.append('(no traversal running)')
    for t in travs:
        lines.append('%-28s %-8s %-8s %11s %s %7.1f %6d %6d %8s' % (
            _stack(t, t.get('depth', 0))[:28], t['action'], t['state'],
            '%d/%d' % (t['done'], t['total']), bar(t['done'], t['total']),
            t['rate'], t['ready'], t['waiting'],
            progress.duration(now - t['started'])))
    lines += ['', '%-44s %9s %s' % ('ENGINE', 'IN FLIGHT', '')]
    if not snap['engines']:
        lines.append('(no unit in flight)')
    for e in snap['engines']:
        lines.append('%-44s %9d %s' % (
            e['id'][:44], e['in_flight'],
            '' if e.get('live') is None else
            ('live' if e['live'] else 'gone: the sweeper sends its work '
             'again')))
    sections = [
        ('WAITS DUE WITHIN %g s' % snap['due_within'], ('DUE',),
         snap['waits'], lambda w: '%s%s' % (
             _seconds(w['in']),
             '  (or on %s)' % w['event'] if w.get('event') else '')),
        ('RUNNING LONGEST', ('ACTION', 'FOR', 'ENGINE'), snap['in_flight'],
         lambda f: '%-8s %7.1f s  %s' % (f['action'], f['seconds'],
                                         f['engine'])),
        ('SLOWEST ENDED IN THE LAST %g s' % snap['window'],
         ('ACTION', 'TOOK', 'STATUS', 'ENDED'), snap['slowest'],
         lambda e: '%-8s %7.1f s  %-8s %.0f s ago' % (
             e['action'], e['seconds'], e['status'], e['ago'])),
    ]
    for title, heads, rows, fmt in sections:
        lines += ['', title, '%-28s %-20s %s' % (
            'STACK', 'RESOURCE', _heads(heads))]
        lines += ['%-28s %-20s %s' % (str(r['stack_name'])[:28],
                                      str(r['resource'])[:20], fmt(r))
                  for r in rows] or ['(none)']
    if width is not None:
        lines = [line[:width] for line in lines]
    if height is not None:
        lines = lines[:max(height - 1, 0)]
        lines += [''] * (height - 1 - len(lines))
        lines.append('q quits'[:width])
    return lines


class Top(command.Command):
    """Show what the engine is doing now, refreshed (q quits)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--interval', metavar='<seconds>', type=float,
                            default=1.0,
                            help='Seconds between refreshes (default 1)')
        parser.add_argument('--window', metavar='<seconds>', type=float,
                            default=10.0,
                            help='Seconds the rates and the slowest actions '
                                 'are taken over (default 10)')
        parser.add_argument('--due', metavar='<seconds>', type=float,
                            default=30.0,
                            help='Show the waits due within this many '
                                 'seconds (default 30)')
        parser.add_argument('--all-projects', action='store_true',
                            help='Every project\'s stacks and every live '
                                 'engine (against converge-api: an '
                                 'admin\'s)')
        parser.add_argument('--once', action='store_true',
                            help='Print one snapshot and exit (so without '
                                 'a terminal)')
        return parser

    def _snapshot(self, args):
        return self.app.service().engine_activity(
            self.app.context(), all_projects=args.all_projects,
            window=args.window, due_within=args.due)

    def _source(self):
        if self.app.remote():
            return self.app.options.os_url
        from converge import conf
        return 'embedded %s' % conf.home_dir()

    def take_action(self, args):
        if not args.interval > 0:
            raise exception.InvalidInput('--interval: a number of seconds '
                                         'above 0')
        out = self.app.stdout
        if args.once or not (out.isatty() and sys.stdin.isatty()):
            out.write('\n'.join(render(self._snapshot(args),
                                       source=self._source())) + '\n')
            return 0
        snap = self._snapshot(args)  # an error says so before the screen
        # the terminal's encoding, for names that are not ASCII
        locale.setlocale(locale.LC_ALL, '')
        curses.wrapper(self._loop, args, snap)
        return 0

    def _loop(self, screen, args, snap):
        try:
            curses.curs_set(0)
        except curses.error:  # a terminal that cannot hide it
            pass
        screen.timeout(int(KEY_POLL * 1000))
        source = self._source()
        error = ''
        next_at = time.monotonic() + args.interval
        while True:
            height, width = screen.getmaxyx()
            lines = render(snap, width - 1, height, source)
            if error:
                lines[-1] = ('q quits  (%s)' % error)[:width - 1]
            screen.erase()
            for y, line in enumerate(lines):
                screen.addstr(y, 0, line)
            screen.refresh()
            while True:
                key = screen.getch()
                if key in (ord('q'), ord('Q')):
                    return
                if key == curses.KEY_RESIZE or \
                        time.monotonic() >= next_at:
                    break
            if time.monotonic() < next_at:
                continue  # a resize: draw again now
            next_at = time.monotonic() + args.interval
            try:
                snap = self._snapshot(args)
                error = ''
            except (exception.Unauthorized, exception.Forbidden):
                raise
            except exception.ConvergeError as e:
                # converge-api restarting or out of reach: the last
                # snapshot stays up, saying why it is not refreshed
                error = str(e)

