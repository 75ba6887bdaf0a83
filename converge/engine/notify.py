"""Notifications: every stack and resource state change, and every drift,
also published as an oslo.messaging notification, so that listeners
subscribe instead of polling.

Off unless `[oslo_messaging_notifications] driver` is set (oslo's own
option; `messagingv2` on RabbitMQ, on the topics of its `topics`,
Heat's `notifications` by default). Nothing on a unit of work's path
publishes: a **relay** in one engine at a time (a tooz lock elects it,
as the sweeper) reads what was committed and publishes it:

- the stack's own changes from its traversals (one started, one ended),
  as Heat names them: ``orchestration.stack.create.start``,
  ``orchestration.stack.update.end``, ``orchestration.stack.delete.error``
  (priority ERROR), ...;
- each event row (events table): a resource's state change as
  ``orchestration.resource.<action>.<start|end|error>``, a drift as
  ``orchestration.resource.drift`` (``.in_sync`` when it goes away), a
  repair of continuous convergence as ``orchestration.stack.repair.start``
  (``.error`` when it failed).

Delivery is at least once: the relay remembers what it published for a
while and looks back a few seconds each time (a row committed out of id
order is not missed); a relay that takes over from a dead one may publish
a few again. Each payload carries the event's ``event_id`` (or the
traversal's id and state) to tell them apart.

Events are read by id (the primary key); traversals by their start and
end times. A stack's environment may name more topics (Heat's
``event_sinks``, the type ``zaqar-queue`` read as a notification topic):
its events go there too.
"""

import collections
import datetime
import socket
import time

from oslo_log import log as logging
import sqlalchemy as sa

from converge import conf as conf_mod
from converge.db import models

LOG = logging.getLogger(__name__)

#: seconds the relay looks back each time (a transaction that committed
#: late with an older id or time is still seen)
LOOK_BACK = 5.0
#: how many published keys the relay remembers (older ones fall out)
REMEMBER = 100000
_PHASE = {'IN_PROGRESS': 'start', 'COMPLETE': 'end', 'FAILED': 'error'}
_OBSERVE = {'DRIFTED': 'orchestration.resource.drift',
            'IN_SYNC': 'orchestration.resource.in_sync',
            'REPAIRING': 'orchestration.stack.repair.start',
            'REPAIR_FAILED': 'orchestration.stack.repair.error',
            'FACTS_CHANGED': 'orchestration.stack.facts_changed'}


def enabled():
    """Whether notifications are configured (oslo.messaging registers its
    notification options when it first notifies: here, before). Its
    notifier module's own options, as its Notifier registers them:
    oslo_messaging.opts lists every driver's, and loading the rabbit and
    kafka drivers for that was 0.08 s of every command that runs the
    engine."""
    from oslo_messaging.notify import notifier
    conf = conf_mod.CONF
    conf.register_opts(notifier._notifier_opts,
                       group='oslo_messaging_notifications')
    return bool(conf.oslo_messaging_notifications.driver)


class Relay:
    """Publishes what was committed since it last looked (`relay_once`,
    called on the engine's notifier clock)."""

    def __init__(self, engine):
        import oslo_messaging
        conf_mod.messaging_options()   # converge's transport defaults
        self.engine = engine
        self._messaging = oslo_messaging
        self.transport = oslo_messaging.get_notification_transport(
            conf_mod.CONF)
        self.notifier = oslo_messaging.Notifier(
            self.transport, publisher_id='orchestration.%s' %
            socket.gethostname())
        self._sinks = {}       # topic -> Notifier
        self._seen = collections.OrderedDict()
        self._since = time.time() - LOOK_BACK
        # events are read by id (the primary key, not a scan by time):
        # above `_floor`, which follows the highest id read LOOK_BACK
        # seconds ago (an id taken earlier but committed later is seen)
        with engine.db.read() as s:   # what came before this relay is past
            self._floor = s.scalar(sa.select(sa.func.max(
                models.Event.id))) or 0
        self._marks = collections.deque()   # (when read, highest id)
        self._sinks_of = {}    # template id -> topics (event_sinks)

    def relay_once(self):
        """Publish what is new; returns how many were published."""
        lock = self.engine.locks.try_lock('notifier')
        if lock is None:
            return 0
        try:
            now = time.time()
            since = self._since - LOOK_BACK
            # both kinds in the order they happened
            new = sorted(self._traversals(since) + self._events(),
                         key=lambda item: item[0])
            for _ts, *item in new:
                self._publish(*item)
            self._since = now
            return len(new)
        finally:
            lock.release()

    # -- what to publish ------------------------------------------------------
    def _traversals(self, since):
        T, S = models.Traversal, models.Stack
        after = datetime.datetime.utcfromtimestamp(since)
        with self.engine.db.read() as s:
            rows = s.execute(sa.select(
                T, S.name, S.project_id, S.template_id).join(
                S, S.id == T.stack_id).where(sa.or_(
                    T.created_at >= after, T.finished_at >= after))).all()
        new = []
        for trav, name, project, template_id in rows:
            # the stack's action (a restore's RESTORE, not its UPDATE)
            action = (trav.options or {}).get('shown_action') or trav.action
            marks = [('IN_PROGRESS', 'Stack %s started' % action)]
            if trav.finished_at is not None and trav.state in (
                    'complete', 'failed', 'cancelled'):
                marks.append(('COMPLETE', 'Stack %s completed successfully'
                              % action) if trav.state == 'complete'
                             else ('FAILED', trav.failure or 'Stack %s %s' %
                                   (action, trav.state)))
            for status, reason in marks:
                key = ('traversal', trav.id, status)
                if key in self._seen:
                    continue
                payload = {
                    'stack_identity': trav.stack_id, 'stack_name': name,
                    'tenant_id': project, 'traversal_id': trav.id,
                    'state': '%s_%s' % (action, status),
                    'state_reason': reason,
                    'create_at': _iso(trav.created_at)}
                when = trav.created_at if status == 'IN_PROGRESS' \
                    else trav.finished_at
                scaling = (trav.options or {}).get('cause', {}).get(
                    'scaling')
                if scaling:
                    # a scaling signal's: Heat's autoscaling notification
                    payload.update(scaling)
                    event_type = 'orchestration.autoscaling.%s' % \
                        _PHASE[status]
                else:
                    event_type = 'orchestration.stack.%s.%s' % (
                        action.lower(), _PHASE[status])
                new.append((_epoch(when), key, event_type, status,
                            payload, template_id))
        return new

    def _events(self):
        E, S = models.Event, models.Stack
        now = time.time()
        with self.engine.db.read() as s:
            rows = s.execute(sa.select(
                E, S.name, S.project_id, S.template_id).join(
                S, S.id == E.stack_id).where(E.id > self._floor).order_by(
                E.id)).all()
        self._marks.append((now, rows[-1][0].id if rows else self._floor))
        while self._marks and self._marks[0][0] < now - LOOK_BACK:
            self._floor = max(self._floor, self._marks.popleft()[1])
        new = []
        for ev, name, project, template_id in rows:
            key = ('event', ev.id)
            if key in self._seen:
                continue
            if ev.action == 'OBSERVE':
                event_type = _OBSERVE.get(ev.status,
                                          'orchestration.resource.observe')
                status = 'FAILED' if ev.status == 'REPAIR_FAILED' else \
                    'COMPLETE'
            else:
                event_type = 'orchestration.resource.%s.%s' % (
                    ev.action.lower(), _PHASE.get(ev.status, 'end'))
                status = ev.status
            payload = {
                'event_id': ev.uuid, 'stack_identity': ev.stack_id,
                'stack_name': name, 'tenant_id': project,
                'traversal_id': ev.traversal_id,
                'resource_name': ev.resource_name,
                'resource_type': ev.resource_type,
                'physical_resource_id': ev.physical_id,
                'resource_action': ev.action, 'resource_status': ev.status,
                'resource_status_reason': ev.reason,
                'timestamp': ev.timestamp}
            new.append((ev.timestamp, key, event_type, status, payload,
                        template_id))
        return new

    # -- publishing -----------------------------------------------------------
    def _publish(self, key, event_type, status, payload, template_id):
        ctxt = {'project_id': payload.get('tenant_id')}
        send = 'error' if status == 'FAILED' else 'info'
        getattr(self.notifier, send)(ctxt, event_type, payload)
        for topic in self._sinks_for(template_id):
            getattr(self._sink(topic), send)(ctxt, event_type, payload)
        self._seen[key] = True
        while len(self._seen) > REMEMBER:
            self._seen.popitem(last=False)

    def _sink(self, topic):
        notifier = self._sinks.get(topic)
        if notifier is None:
            notifier = self._sinks[topic] = self._messaging.Notifier(
                self.transport, publisher_id=self.notifier.publisher_id,
                topics=[topic])
        return notifier

    def _sinks_for(self, template_id):
        """The notification topics the stack's environment names (its
        event_sinks), read once per template version (an update that
        changes them is a new one)."""
        if template_id is None:
            return ()
        topics = self._sinks_of.get(template_id)
        if topics is None:
            topics = self._sinks_of[template_id] = self._read_sinks(
                template_id)
        return topics

    def _read_sinks(self, template_id):
        with self.engine.db.read() as s:
            tmpl = s.get(models.Template, template_id)
        env = ((tmpl.bundle or {}).get('environment') or {}) if tmpl else {}
        return tuple(sink_topics(env.get('event_sinks') or ()))

    def close(self):
        self.transport.cleanup()


def sink_topics(sinks):
    """The topics of a stack's event_sinks: Heat's ``zaqar-queue`` sinks,
    each its ``target`` read as a notification topic."""
    for sink in sinks:
        if isinstance(sink, dict) and sink.get('type') == 'zaqar-queue' \
                and sink.get('target'):
            yield str(sink['target'])


def _epoch(dt):
    return dt.replace(tzinfo=datetime.timezone.utc).timestamp()


def _iso(dt):
    return dt.strftime('%Y-%m-%dT%H:%M:%SZ') if dt else None
