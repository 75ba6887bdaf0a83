"""AWS::RDS::DBInstance: a MySQL server in a nested stack of its own
(Heat maps the type to its template AWS_RDS_DBInstance.yaml; converge's
is templates/rds_dbinstance.yaml). The database is the server's, set up
by cfn-init; the resource is complete once the server signalled that
the database is ready. Endpoint.Address is the server's address,
Endpoint.Port the database's port.
"""

from converge.resources import aws_service_stack
from converge.resources import properties as p


def _not_implemented(kind=p.STRING):
    return p.Schema(kind, 'Not Implemented.')


class DBInstance(aws_service_stack.ServiceStack):
    template_name = 'rds_dbinstance.yaml'
    server = 'DatabaseInstance'

    properties_schema = {
        'DBSnapshotIdentifier': _not_implemented(),
        'AllocatedStorage': p.Schema(p.STRING, 'The allocated storage '
                                     '(GB).', required=True),
        'AvailabilityZone': _not_implemented(),
        'BackupRetentionPeriod': _not_implemented(),
        'DBInstanceClass': p.Schema(p.STRING, 'The database instance '
                                    'class (db.m1.small ...: the flavor '
                                    'm1.small ...).', required=True),
        'DBName': p.Schema(p.STRING, 'The name of the database.'),
        'DBParameterGroupName': _not_implemented(),
        'DBSecurityGroups': p.Schema(p.LIST, 'Security groups (kept, not '
                                     'applied: the server has its own).',
                                     default=[]),
        'DBSubnetGroupName': _not_implemented(),
        'Engine': p.Schema(p.STRING, 'The database engine.', required=True,
                           allowed_values=('MySQL',)),
        'EngineVersion': _not_implemented(),
        'LicenseModel': _not_implemented(),
        'MasterUsername': p.Schema(p.STRING, 'The database user.',
                                   required=True),
        'MasterUserPassword': p.Schema(p.STRING, 'The database user\'s '
                                       'password.', required=True),
        'Port': p.Schema(p.STRING, 'The database port.', default='3306'),
        'PreferredBackupWindow': _not_implemented(),
        'PreferredMaintenanceWindow': _not_implemented(),
        'MultiAZ': _not_implemented(p.BOOLEAN),
    }
    attributes_schema = {
        'Endpoint.Address': 'Connection endpoint for the database.',
        'Endpoint.Port': 'The port number on which the database accepts '
                         'connections.',
    }

    def params(self):
        props = self.properties
        out = {k: props[k] for k in (
            'AllocatedStorage', 'DBInstanceClass', 'Engine',
            'MasterUsername', 'MasterUserPassword', 'Port')}
        out['DBName'] = props.get('DBName') or ''
        out['DBSecurityGroups'] = ','.join(props.get('DBSecurityGroups')
                                           or [])
        return out
