"""AWS::IAM::User and AWS::IAM::AccessKey, without a keystone user.

Heat makes each User a keystone user in its stack user domain and each
AccessKey an EC2 credential of that user, so that the instance's
cfn-hup, cfn-init and cfn-push-stats can sign their calls to Heat's
CloudFormation API (the key written into /etc/cfn/cfn-credentials).
converge makes no keystone user per deployment (the same rule its wait
condition handles and software deployments follow): a User here is a
name, and an AccessKey is a credential of converge's own, derived the
way a wait condition handle's token is (drivers/access_keys.py): the
key id comes from the resource, the secret is the HMAC of that id under
the engine's secret. Nothing is made in a cloud and nothing secret is
stored; the secret is masked where the stack's readers (not its
members) see it.

What does not carry over: converge serves no CloudFormation API, so
nothing accepts the pair yet (the instance gets it, as the template
says, and cfn-hup finds no endpoint to ask); a User's Policies are
kept, not enforced; an AccessKey's UserName is any name (Heat looks
the User up in the stack: a plug-in here never reads another
resource).
"""

from converge import exception
from converge.resources import base
from converge.resources import none
from converge.resources import properties as p


class User(none.Named):
    """A name (Heat's physical name of the user, its Ref) and nothing in
    a cloud."""

    properties_schema = {
        'Path': p.Schema(p.STRING, 'Not Implemented.'),
        'Groups': p.Schema(p.LIST, 'Not Implemented.'),
        'LoginProfile': p.Schema(p.MAP, 'A login profile for the user.',
                                 schema={'Password': p.Schema(p.STRING)}),
        'Policies': p.Schema(p.LIST, 'Access policies to apply to the '
                             'user (kept, not enforced).'),
    }
    attributes_schema = {}


def _key_id(resource):
    # 20 characters, as an AWS access key id; derived, so a create
    # repeated after a crash makes the same key
    return none.derived_uuid(resource.uuid, 'access-key').replace(
        '-', '')[:20].upper()


class AccessKey(base.Resource):
    """An access key id (its Ref) and SecretAccessKey, converge's own
    credential (see the top)."""

    logical = True
    credential_attributes = ('SecretAccessKey',)

    properties_schema = {
        'Serial': p.Schema(p.INTEGER, 'Not Implemented.'),
        'UserName': p.Schema(p.STRING, 'The name of the user that the new '
                             'key will belong to.', required=True),
        'Status': p.Schema(p.STRING, 'Not Implemented.',
                           allowed_values=('Active', 'Inactive')),
    }
    attributes_schema = {
        'UserName': 'Username associated with the AccessKey.',
        'SecretAccessKey': 'Keypair secret key.',
    }

    def create(self):
        self.physical_id = _key_id(self)

    def update(self, prior, observed):
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)

    def delete(self):
        return None

    def get_attributes(self, observed):
        if not self.physical_id:
            return {'UserName': self.properties.get('UserName'),
                    'SecretAccessKey': None}
        return {'UserName': self.properties.get('UserName'),
                'SecretAccessKey': self.clients.access_keys.secret(
                    self.physical_id)}
