"""Pieces shared by the commands: parameters, templates, running work."""

import os
import sys

from converge import conf as conf_mod
from converge import exception
from converge.cmd import progress
from converge.engine.views import iso  # noqa: F401


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
    params = {}
    for item in args.parameter or ():
        for pair in item.split(';'):
            if not pair:
                continue
            if '=' not in pair:
                raise exception.ConvergeError(
                    'Malformed parameter (%s): use the format key=value'
                    % pair)
            key, value = pair.split('=', 1)
            params[key] = value
    for item in getattr(args, 'parameter_file', None) or ():
        if '=' not in item:
            raise exception.ConvergeError(
                'Malformed parameter file (%s): use key=file' % item)
        key, path = item.split('=', 1)
        with open(path) as f:
            params[key] = f.read()
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


def run(app, args, operation):
    """Start a traversal with `operation(engine)` and, embedded or with
    --wait, follow it to the end. Returns the stack row."""
    engine = app.engine()
    embedded = conf_mod.is_embedded()
    if embedded:
        from converge.workers import pool
        pool.start(engine)
    stack_id, traversal_id = operation(engine)
    if not embedded and not getattr(args, 'wait', False):
        return _stack(engine, stack_id)
    try:
        outcome = progress.follow(engine, stack_id, traversal_id,
                                  out=sys.stderr if _quiet(args)
                                  else app.stdout,
                                  local_workers=embedded)
    except KeyboardInterrupt:
        sys.stderr.write(
            '\nInterrupted. Nothing is lost: the stack stays IN_PROGRESS; '
            'run "converge stack converge %s" to finish it.\n' % stack_id)
        sys.stderr.flush()
        os._exit(130)
    stack = outcome.stack
    if outcome.superseded_by is not None:
        raise exception.Conflict(
            'Stack %s: superseded by another operation (%s, traversal %s) '
            'started elsewhere; this process stopped.' % (
                stack.name, outcome.superseded_by.action,
                outcome.superseded_by.id))
    if stack.status == 'FAILED':
        raise exception.ConvergeError('Stack %s %s_FAILED: %s' % (
            stack.name, stack.action, stack.status_reason))
    return stack


def _quiet(args):
    return getattr(args, 'formatter', None) in ('json', 'yaml', 'value',
                                                'shell')


def _stack(engine, stack_id):
    from converge.db import models
    with engine.db.read() as s:
        return s.get(models.Stack, stack_id)
