"""How a server learns where to pull its deployments from, and as whom.

A server booted with ``user_data_format: SOFTWARE_CONFIG`` carries, in its
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
