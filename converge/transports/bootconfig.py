"""Heat's boot config for a SOFTWARE_CONFIG server of one of Heat's
transports: the user data as Heat's nova plug-in builds it
(build_userdata), a MIME multipart cloud-init reads:

1. ``cloud-config``: cloud-init's output also into
   /var/log/cloud-init-output.log;
2. ``boothook.sh`` (``cloud-boothook``): makes heat-cfntools' links in
   /opt/aws/bin where the package did not, and always succeeds;
3. ``part-handler.py`` (``part-handler``): cloud-init's handler of the
   ``text/x-cfninitdata`` parts, each written to
   /var/lib/heat-cfntools/FILENAME and /var/lib/cloud/data/FILENAME;
4. the server's own user data, part by part (here also converge-agent's
   bootstrap part, which an image without converge-agent ignores);
5. ``cfn-init-data`` (``x-cfninitdata``): the server's metadata at boot as
   JSON, with its ``os-collect-config`` section: where os-collect-config
   (its `local`/`heat_local` reading of that file) learns which collector
   to run and where it polls.

Written for converge from Heat's contract (heat/cloudinit and
engine/clients/os/nova.py of Heat 27), not copied.
"""

import email
import email.mime.multipart
import email.mime.text
import json

CLOUD_CONFIG = """\
# converge: Heat's boot config for a SOFTWARE_CONFIG server

# everything cloud-init's modules write, also kept in a log file
output: {all: '| tee -a /var/log/cloud-init-output.log'}
"""

BOOTHOOK = """\
#!/bin/bash
# heat-cfntools installed from a package may lack its /opt/aws/bin links
if command -v cfn-create-aws-symlinks >/dev/null 2>&1; then
    cfn-create-aws-symlinks
fi
# a boothook that fails stops cloud-init: this one never does
exit 0
"""

PART_HANDLER = '''\
#part-handler
# converge: writes each text/x-cfninitdata part of the user data where
# heat-cfntools and os-collect-config read it
import datetime
import os

DIRS = ('/var/lib/heat-cfntools', '/var/lib/cloud/data')


def list_types():
    return ['text/x-cfninitdata']


def handle_part(data, ctype, filename, payload):
    if ctype == '__begin__':
        for d in DIRS:
            os.makedirs(d, 0o700, exist_ok=True)
        return
    if ctype == '__end__' or ctype != 'text/x-cfninitdata':
        return
    with open('/var/log/part-handler.log', 'a') as log:
        log.write('%s filename:%s, ctype:%s\\n' % (
            datetime.datetime.now(), filename, ctype))
    name = os.path.basename(filename)
    for d in DIRS:
        with open(os.path.join(d, name), 'w') as f:
            f.write(payload)
'''


def _part(content, filename, subtype):
    content = content or ''
    try:
        content.encode('us-ascii')
        charset = 'us-ascii'
    except UnicodeEncodeError:
        charset = 'utf-8'
    part = email.mime.text.MIMEText(content, subtype, charset)
    part.add_header('Content-Disposition', 'attachment', filename=filename)
    return part


def build(user_data, metadata):
    """The user data to boot with: Heat's parts, `user_data`'s (a MIME
    multipart is split into its parts, anything else is one part), and
    `metadata` as cfn-init-data."""
    parts = [(CLOUD_CONFIG, 'cloud-config', 'cloud-config'),
             (BOOTHOOK, 'boothook.sh', 'cloud-boothook'),
             (PART_HANDLER, 'part-handler.py', 'part-handler')]
    doc = None
    if user_data:
        try:
            doc = email.message_from_string(user_data)
        except Exception:
            doc = None
    if doc is not None and doc.is_multipart():
        for i, sub in enumerate(doc.get_payload()):
            payload = sub.get_payload(decode=True)
            text = payload.decode('utf-8', 'replace') \
                if payload is not None else ''
            parts.append((text, sub.get_filename() or 'part-%03d' % i,
                          sub.get_content_subtype()))
    elif user_data:
        subtype = ('cloud-config' if user_data.startswith('#cloud-config')
                   else 'x-shellscript' if user_data.startswith('#!')
                   else 'plain')
        parts.append((user_data, 'user-data', subtype))
    if metadata:
        parts.append((json.dumps(metadata, sort_keys=True),
                      'cfn-init-data', 'x-cfninitdata'))
    return email.mime.multipart.MIMEMultipart(
        _subparts=[_part(*p) for p in parts]).as_string()


def metadata_at_boot(user_data):
    """The cfn-init-data a boot config carries (None: none), as the part
    handler would write it."""
    try:
        doc = email.message_from_string(user_data or '')
    except Exception:
        return None
    for part in doc.walk():
        if part.get_content_type() == 'text/x-cfninitdata' and \
                part.get_filename() == 'cfn-init-data':
            try:
                return json.loads(part.get_payload(decode=True))
            except ValueError:
                return None
    return None
