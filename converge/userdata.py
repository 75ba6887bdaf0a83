"""A server's user_data, as both sides read it: the engine and the
simulated cloud (which boots what it finds there) and the software on the
server (agent/). A room of its own so that neither imports the other.

How a server learns where to pull its deployments from, and as whom: a
server booted with ``user_data_format: SOFTWARE_CONFIG`` carries, in its
user_data, a MIME multipart with one part of type ``text/x-converge-agent``:
JSON ``{"endpoint", "agent_id", "token"}``. The template's own user_data, if
any, travels as another part, as cloud-init expects. The engine writes it
(`encode`); the agent on the server reads it (`decode`).
"""

import email
import email.mime.multipart
import email.mime.text
import json

CONTENT_TYPE = 'text/x-converge-agent'
#: the simulator's image whose servers run Heat's guest tooling
#: (converge/agent/image.py builds it; the sim's drivers only name it)
HEAT_AGENTS_IMAGE = 'heat-agents'
_SUBTYPE = CONTENT_TYPE.split('/', 1)[1]


def encode(user_data, endpoint, agent_id, token):
    """The user_data to boot with: `user_data` (may be empty) and the
    agent's part, as one multipart document."""
    doc = email.mime.multipart.MIMEMultipart()
    if user_data:
        subtype = ('cloud-config' if user_data.startswith('#cloud-config')
                   else 'x-shellscript')
        doc.attach(email.mime.text.MIMEText(user_data, subtype, 'utf-8'))
    part = email.mime.text.MIMEText(json.dumps(
        {'endpoint': endpoint, 'agent_id': agent_id, 'token': token},
        sort_keys=True), _SUBTYPE, 'utf-8')
    part.add_header('Content-Disposition', 'attachment',
                    filename='converge-agent.json')
    doc.attach(part)
    return doc.as_string()


def decode(user_data):
    """The agent's settings {"endpoint", "agent_id", "token"} found in
    `user_data`, or None when it has none (not a SOFTWARE_CONFIG server)."""
    if not user_data or CONTENT_TYPE not in user_data:
        return None
    try:
        doc = email.message_from_string(user_data)
    except Exception:  # not MIME at all
        return None
    for part in doc.walk():
        if part.get_content_type() != CONTENT_TYPE:
            continue
        try:
            found = json.loads(part.get_payload(decode=True).decode('utf-8'))
        except ValueError:
            return None
        if isinstance(found, dict) and {'endpoint', 'agent_id',
                                        'token'} <= set(found):
            return found
    return None


def rewrite(user_data, change):
    """`user_data` (a MIME multipart, as `encode` writes it) with each of
    its parts' text passed through `change(content type, text)`; as given
    when it is not MIME or nothing changed. How a part's text is seen
    where it travels base64-encoded (a server's user_data as the cloud
    shows it): masked, re-encoded."""
    try:
        doc = email.message_from_string(user_data)
    except Exception:
        return user_data
    if not doc.is_multipart():
        return user_data
    changed = False
    for part in doc.walk():
        if part.is_multipart():
            continue
        try:
            text = part.get_payload(decode=True).decode('utf-8')
        except (AttributeError, UnicodeDecodeError):
            continue
        new = change(part.get_content_type(), text)
        if new != text:
            del part['Content-Transfer-Encoding']
            part.set_payload(new, 'utf-8')
            changed = True
    return doc.as_string() if changed else user_data


def without_token(text, mask):
    """An agent part's text with its token replaced by `mask`."""
    try:
        found = json.loads(text)
    except ValueError:
        return mask
    if not isinstance(found, dict):
        return mask
    if 'token' in found:
        found['token'] = mask
    return json.dumps(found, sort_keys=True)


# -- what cloud-init acts on (agent/firstboot.py runs it on the sim) -------
CLOUD_CONFIG = 'text/cloud-config'
SHELLSCRIPT = 'text/x-shellscript'


def parts(user_data):
    """[(content type, text)] of the parts cloud-init acts on, in order;
    [] when there are none (cheap for user_data without any)."""
    if not user_data or not any(mark in user_data for mark in (
            '#cloud-config', '#!', CLOUD_CONFIG, SHELLSCRIPT)):
        return []
    if not user_data.lstrip().startswith(('#cloud-config', '#!')):
        try:
            doc = email.message_from_string(user_data)
        except Exception:   # not MIME: nothing cloud-init would run
            return []
        if doc.is_multipart():
            found = []
            for content_type, text, _name in _leaves(doc):
                kind = _kind(content_type, text)
                if kind is not None:
                    found.append(kind)
            return found
    kind = _kind('text/plain', user_data)
    return [kind] if kind is not None else []


def _kind(content_type, text):
    if content_type in (CLOUD_CONFIG, SHELLSCRIPT):
        return content_type, text
    if content_type == 'text/plain':
        if text.startswith('#cloud-config'):
            return CLOUD_CONFIG, text
        if text.startswith('#!'):
            return SHELLSCRIPT, text
    return None


# -- every part, for an image whose cloud-init acts on more (part
# handlers, boothooks): converge/agent/imageboot.py --------------------------
BOOTHOOK = 'text/cloud-boothook'
PART_HANDLER = 'text/part-handler'
_STARTS = (('#cloud-config', CLOUD_CONFIG), ('#cloud-boothook', BOOTHOOK),
           ('#part-handler', PART_HANDLER), ('#!', SHELLSCRIPT))


def mime_parts(user_data):
    """[(content type, text, filename or None)] of every part of
    `user_data` in order (a text/plain part, or a document that is not
    MIME, typed by its first line as cloud-init types it); [] when empty."""
    if not user_data:
        return []
    if not user_data.lstrip().startswith('#'):
        try:
            doc = email.message_from_string(user_data)
        except Exception:
            doc = None
        if doc is not None and doc.is_multipart():
            return [(_typed(text, kind) if kind == 'text/plain' else kind,
                     text, name) for kind, text, name in _leaves(doc)]
    return [(_typed(user_data, 'text/plain'), user_data, None)]


def _leaves(doc):
    """(content type, text, filename) of each part of multipart `doc`
    that holds a payload, in order."""
    for part in doc.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        if payload is not None:
            yield (part.get_content_type(),
                   payload.decode('utf-8', 'replace'), part.get_filename())


def _typed(text, default):
    for start, kind in _STARTS:
        if text.startswith(start):
            return kind
    return default
