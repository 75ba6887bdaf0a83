"""OS::Heat::MultipartMime: several configs as one MIME multipart message.

Typically a server's user_data made of cloud-config and scripts. Each part
names a stored config by id (its body is read from the config store) or
gives its text inline; a part of type ``multipart`` is itself a multipart
message (another MultipartMime, say) whose parts are taken over one by one.
The message is built once, at create, and stored as an immutable config
(group ``Heat::Ungrouped`` unless ``group`` says otherwise); any change
replaces it.
"""

import email
import email.policy
import hashlib
import json
import os
import uuid as uuid_mod
from email.mime import multipart as mime_multipart
from email.mime import text as mime_text

from converge import exception
from converge.resources import properties as p
from converge.resources import software_config as sc

TYPES = (TEXT, MULTIPART) = ('text', 'multipart')

PART_SCHEMA = {
    'config': p.Schema(
        p.STRING, 'Content of part to attach, either inline or by '
        'referencing the ID of another software config resource.',
        required=True),
    'filename': p.Schema(
        p.STRING, 'Optional filename to associate with part.'),
    'type': p.Schema(
        p.STRING, 'Whether the part content is text or multipart.',
        default=TEXT, allowed_values=TYPES),
    'subtype': p.Schema(
        p.STRING, 'Optional subtype to specify with the type.'),
}


def _is_uuid(value):
    try:
        uuid_mod.UUID(value)
    except (TypeError, ValueError, AttributeError):
        return False
    return True


def _text(body):
    """A stored config body as text (a structured one as JSON)."""
    if body is None:
        return ''
    if isinstance(body, str):
        return body
    return json.dumps(body, sort_keys=True)


def _text_part(body, subtype, filename):
    if not subtype and filename:
        # Heat's rule: the file name without its extension
        subtype = os.path.splitext(filename)[0]
    part = mime_text.MIMEText(body, _subtype=subtype or 'plain',
                              _charset=_charset(body))
    if filename:
        part.add_header('Content-Disposition', 'attachment',
                        filename=filename)
    return part


def _charset(body):
    try:
        body.encode('ascii')
    except UnicodeEncodeError:
        return 'utf-8'
    return 'us-ascii'


def _subparts(message_text):
    """The parts of a multipart message as (text, subtype, filename); []
    when it is not a multipart message."""
    msg = email.message_from_string(message_text,
                                    policy=email.policy.compat32)
    if not msg.is_multipart():
        return []
    out = []
    for part in msg.get_payload():
        raw = part.get_payload(decode=True)
        if raw is None:  # a nested multipart: kept whole, as text
            body = part.as_string()
        else:
            body = raw.decode(part.get_content_charset() or 'utf-8',
                              'replace')
        out.append((body, part.get_content_subtype(), part.get_filename()))
    return out


def build(parts, lookup, boundary):
    """The MIME message (text) of `parts`.

    :param parts: the validated ``parts`` property
    :param lookup: config id -> stored body, or None when there is no
        such config (the value is then the part's text, as in Heat)
    :param boundary: the MIME boundary (derived from the resource, so a
        repeated build gives the same text)
    """
    subparts = []
    for item in parts:
        value = item.get('config')
        body = value
        if _is_uuid(value):
            stored = lookup(value)
            if stored is not None:
                body = _text(stored)
        if item.get('type', TEXT) == MULTIPART:
            for text, subtype, filename in _subparts(body):
                subparts.append(_text_part(text, subtype, filename))
        else:
            subparts.append(_text_part(body, item.get('subtype'),
                                       item.get('filename')))
    message = mime_multipart.MIMEMultipart(_subparts=subparts,
                                           boundary=boundary)
    return message.as_string()


class MultipartMime(sc.SoftwareConfig):
    properties_schema = {
        'parts': p.Schema(
            p.LIST, 'Parts belonging to this message.', default=[],
            schema=PART_SCHEMA),
        'group': p.Schema(
            p.STRING, 'Namespace to group this software config by when '
            'delivered to a server. This may imply what configuration '
            'tool is going to perform the configuration.',
            default='Heat::Ungrouped'),
    }

    def _boundary(self):
        digest = hashlib.sha256(('converge:mime:%s' % self.uuid).encode())
        return '===============%s==' % digest.hexdigest()[:19]

    def _lookup(self, config_id):
        row = self._store().get(config_id)
        return None if row is None else row.get('config')

    def _body(self):
        if self._store() is None:
            raise exception.ResourceFailure(
                'No software config store available for %s' % self.name)
        return dict(super()._body(),
                    config=build(self.properties.get('parts') or [],
                                 self._lookup, self._boundary()))

    def get_attributes(self, observed):
        if isinstance(observed, dict) and 'config' in observed:
            return {'config': observed.get('config')}
        return {'config': None}
