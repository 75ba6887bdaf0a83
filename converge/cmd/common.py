"""Pieces shared by the commands: parameters, templates, running work."""

import sys

from converge import conf as conf_mod
from converge import exception
from converge.cmd import progress


def add_template_args(parser, required=True):
    parser.add_argument('-t', '--template', metavar='<template>',
                        required=required, help='Path to the template')
    parser.add_argument('-e', '--environment', metavar='<environment>',
                        action='append', default=[],
                        help='Path to an environment (repeatable)')
    parser.add_argument('--parameter', metavar='<key=value>',
                        action='append', default=[],
                        help='Parameter value; repeatable, or "k1=v1;k2=v2"')
    parser.add_argument('--parameter-file', metavar='<key=file>',
                        action='append', default=[],
                        help='Parameter whose value is a file\'s contents')


def parameters(args):
    from converge.template import bounds
    params = {}
    for item in args.parameter or ():
        for pair in item.split(';'):
            if not pair:
                continue
            if '=' not in pair:
                raise exception.InvalidInput(
                    'Malformed parameter (%s): use the format key=value'
                    % pair)
            if bounds.lone_surrogate(pair):
                # bytes of the command line that are not UTF-8 (Python
                # gives them as lone surrogates): no text to store
                raise exception.InvalidInput(
                    'Parameter %s: not UTF-8 text' % ascii(pair))
            key, value = pair.split('=', 1)
            params[key] = value
    for item in getattr(args, 'parameter_file', None) or ():
        if '=' not in item:
            raise exception.InvalidInput(
                'Malformed parameter file (%s): use key=file' % item)
        key, path = item.split('=', 1)
        try:
            with open(path, encoding='utf-8') as f:
                params[key] = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise exception.InvalidInput(
                'Parameter file %s (%s): could not read it: %s' % (
                    path, key, e))
    return params


def bundle(args):
    from converge import template
    return template.load_bundle(
        args.template, args.environment or (),
        max_size=conf_mod.CONF.max_template_size)


def add_wait(parser):
    parser.add_argument('--wait', action='store_true',
                        help='Wait until the stack leaves IN_PROGRESS '
                             '(embedded: always)')


def add_converge_policy(parser):
    parser.add_argument('--converge-policy', metavar='<mode[:seconds]>',
                        help='Continuous convergence: off, observe (record '
                             'and event drift) or repair (also converge '
                             'it), every SECONDS ([observer] interval by '
                             'default); the environment\'s "converge" '
                             'section says the same')


def add_timeout(parser, help_text):
    parser.add_argument('--timeout', metavar='<timeout>', type=int,
                        help=help_text + ' (minutes, a positive number)')


def run(app, args, ident, operation, until_paused=False):
    """Start a traversal with `operation(service, ctx)` and, embedded or
    with --wait, follow it to the end (or, `until_paused`, until the stack
    waits for its hooks alone). `ident` names the stack in the message
    that says how to resume after Ctrl-C. Returns the stack's record;
    raises when the operation did not reach its goal."""
    svc, ctx = app.service(), app.context()
    embedded = app.runs_engine()
    app.resume_hint = ident
    if embedded:
        # this process is the engine: it runs the traversal's units
        from converge.workers import pool
        pool.start(app.engine(), observe=False)
        # the CLI is the engine while the command runs: its metrics are
        # served only when asked ([metrics] cli_port)
        from converge import metrics
        metrics.serve('cli')
        from converge import tracing
        tracing.setup('cli')
        # and serves the agents of its servers while it runs
        app.serve_api()
    started = operation(svc, ctx)
    stack_id, traversal_id = started['id'], started['traversal_id']
    if not embedded and not getattr(args, 'wait', False):
        return svc.stack_status(ctx, stack_id)
    outcome = progress.follow(svc, ctx, stack_id, traversal_id,
                              out=sys.stderr if _quiet(args)
                              else app.stdout,
                              local_workers=embedded,
                              until=(lambda: svc.hooks_paused(ctx, stack_id))
                              if until_paused else None)
    app.resume_hint = None  # the traversal ended: nothing to resume
    stack = outcome.stack
    if outcome.paused:
        sys.stderr.write('Stack %s is paused at its hooks: see `converge '
                         'stack hook poll %s`\n' % (stack.name, stack.name))
        return stack
    if outcome.superseded_by is not None:
        raise exception.Conflict(
            'Stack %s: superseded by another operation (%s, traversal %s) '
            'started elsewhere; this process stopped.' % (
                stack.name, outcome.superseded_by['action'],
                outcome.superseded_by['id']))
    if outcome.rolled_back:
        raise exception.ConvergeError(
            'Stack %s failed and was rolled back: %s_%s: %s' % (
                stack.name, stack.action, stack.status, stack.status_reason))
    if stack.status == 'FAILED':
        raise exception.ConvergeError('Stack %s %s_FAILED: %s' % (
            stack.name, stack.action, stack.status_reason))
    return stack


def _quiet(args):
    return getattr(args, 'formatter', None) in ('json', 'yaml', 'value',
                                                'shell')
