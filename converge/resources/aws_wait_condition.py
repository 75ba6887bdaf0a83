"""AWS::CloudFormation::WaitConditionHandle and WaitCondition, on the
OS::Heat ones' store and waiting (wait_condition.py).

The handle's reference (``Ref``) is a pre-signed URL: its signal
endpoint with the token in the query, so that curl or cfn-signal can
post (or put) to it without credentials of their own, CloudFormation's
body (``{"Status": "SUCCESS", "Reason": ..., "UniqueId": ..., "Data":
...}``) or Heat's. The wait condition's ``Handle`` is that URL.
"""

import re
import urllib.parse

from converge.resources import properties as p
from converge.resources import translated
from converge.resources import wait_condition as os_wait


class WaitConditionHandle(os_wait.WaitConditionHandle):
    """A handle whose reference is its pre-signed URL."""

    properties_schema = {}
    attributes_schema = {}

    def reference_id(self):
        if not self.physical_id:
            return self.name
        token = os_wait._store(self).token(self.physical_id)
        return '%s?%s' % (os_wait.signal_url(self.physical_id),
                          urllib.parse.urlencode({'token': token}))

    def get_attributes(self, observed):
        # none a template reads; the token is kept so that it is masked
        # where it occurs (the URL) for those who may not signal
        if not self.physical_id:
            return {}
        return {'token': os_wait._store(self).token(self.physical_id)}


_HANDLE_URL = re.compile(r'/v1/agent/waitconditions/([^/?]+)/signal')


def handle_id(url):
    """The handle's id in its pre-signed URL (anything else as it is:
    the handle's name while nothing is made, or an id)."""
    m = _HANDLE_URL.search(url) if isinstance(url, str) else None
    return urllib.parse.unquote(m.group(1)) if m else url


class WaitCondition(translated.Translated, os_wait.WaitCondition):
    """Waits for Count signals to the handle whose URL is Handle."""

    target = os_wait.WaitCondition

    properties_schema = {
        'Handle': p.Schema(p.STRING, 'The URL of the handle (Ref to an '
                           'AWS::CloudFormation::WaitConditionHandle).',
                           required=True),
        'Timeout': p.Schema(p.NUMBER, 'Seconds to wait for the signals.',
                            required=True, min=1, max=43200),
        'Count': p.Schema(p.INTEGER, 'How many SUCCESS signals to wait '
                          'for.', default=1, min=1, update_allowed=True),
    }
    attributes_schema = {
        'Data': 'JSON string of the signals\' Data, by UniqueId.',
    }

    @classmethod
    def translate(cls, v, path):
        return {'handle': handle_id(v['Handle']), 'timeout': v['Timeout'],
                'count': v.get('Count')}

    def get_attributes(self, observed):
        return {'Data': super().get_attributes(observed)['data']}
