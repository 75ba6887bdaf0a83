"""AWS::ElasticLoadBalancing::LoadBalancer: an HAProxy server in a nested
stack of its own, as Heat's (heat/engine/resources/aws/lb/
loadbalancer.py; converge's template is templates/elb_loadbalancer.yaml).

The HAProxy configuration is written from the first listener, the
health check and the instances' addresses (``0.0.0.0`` for one that has
none, as Heat) into the server's cfn-init metadata; a change of
Instances changes that metadata in place (cfn-hup on the server rereads
it), a change of SecurityGroups the server's groups. The child takes
the parent's KeyName, LbImageId, LbFlavor and LBTimeout parameters when
it has them (Heat's). DNSName is the server's address; the other
attributes are empty strings, as Heat has them.
"""

from converge import exception
from converge.resources import aws_service_stack
from converge.resources import properties as p

_HEALTH_CHECK = {
    'HealthyThreshold': p.Schema(
        p.INTEGER, 'The number of consecutive health probe successes '
        'required before moving the instance to the healthy state.',
        required=True),
    'Interval': p.Schema(
        p.INTEGER, 'The approximate interval, in seconds, between health '
        'checks of an individual instance.', required=True),
    'Target': p.Schema(p.STRING, 'The port being checked.', required=True),
    'Timeout': p.Schema(p.INTEGER, 'Health probe timeout, in seconds.',
                        required=True),
    'UnhealthyThreshold': p.Schema(
        p.INTEGER, 'The number of consecutive health probe failures '
        'required before moving the instance to the unhealthy state',
        required=True),
}

_LISTENER = {
    'InstancePort': p.Schema(p.INTEGER, 'TCP port on which the instance '
                             'server is listening.', required=True),
    'LoadBalancerPort': p.Schema(p.INTEGER, 'The external load balancer '
                                 'port number.', required=True),
    'Protocol': p.Schema(p.STRING, 'The load balancer transport protocol '
                         'to use.', required=True,
                         allowed_values=('TCP', 'HTTP')),
    'SSLCertificateId': p.Schema(p.STRING, 'Not Implemented.'),
    'PolicyNames': p.Schema(p.LIST, 'Not Implemented.'),
}


def haproxy_config(listener, health, addresses):
    """HAProxy's configuration: one frontend on the listener's port,
    every address a backend server on the instance port."""
    check = ''
    if health:
        check = ' check inter %ss fall %s rise %s' % (
            health['Interval'], health['UnhealthyThreshold'],
            health['HealthyThreshold'])
    lines = ['global', '    daemon', '    maxconn 256',
             '    stats socket /tmp/.haproxy-stats', '',
             'defaults', '    mode http', '    timeout connect 5000ms',
             '    timeout client 50000ms', '    timeout server 50000ms', '',
             'frontend http', '    bind *:%s' % listener['LoadBalancerPort'],
             '    default_backend servers', '',
             'backend servers', '    balance roundrobin',
             '    option http-server-close', '    option forwardfor',
             '    option httpchk']
    if health:
        lines.append('    timeout check %ds' % int(health['Timeout']))
    for n, address in enumerate(addresses, 1):
        lines.append('    server server%d %s:%s%s' % (
            n, address, listener['InstancePort'], check))
    return '\n'.join(lines) + '\n'


class LoadBalancer(aws_service_stack.ServiceStack):
    template_name = 'elb_loadbalancer.yaml'
    server = 'LB_instance'
    passed = ('LbImageId', 'LbFlavor', 'LBTimeout')

    properties_schema = {
        'AvailabilityZones': p.Schema(
            p.LIST, 'The Availability Zones in which to create the load '
            'balancer.', required=True),
        'HealthCheck': p.Schema(p.MAP, 'An application health check for '
                                'the instances.', schema=_HEALTH_CHECK),
        'Instances': p.Schema(p.LIST, 'The list of instance IDs load '
                              'balanced.', update_allowed=True),
        'Listeners': p.Schema(p.LIST, 'One or more listeners for this load '
                              'balancer.', required=True, schema=_LISTENER),
        'AppCookieStickinessPolicy': p.Schema(p.STRING, 'Not Implemented.'),
        'LBCookieStickinessPolicy': p.Schema(p.STRING, 'Not Implemented.'),
        'SecurityGroups': p.Schema(p.LIST, 'List of Security Groups '
                                   'assigned on current LB.',
                                   update_allowed=True),
        'Subnets': p.Schema(p.LIST, 'Not Implemented.'),
    }
    attributes_schema = {
        'CanonicalHostedZoneName': 'The name of the hosted zone that is '
                                   'associated with the LoadBalancer.',
        'CanonicalHostedZoneNameID': 'The ID of the hosted zone name that '
                                     'is associated with the LoadBalancer.',
        'DNSName': 'The DNS name for the LoadBalancer.',
        'SourceSecurityGroup.GroupName': 'The security group that you can '
                                         'use as part of your inbound rules '
                                         'for your LoadBalancer\'s back-end '
                                         'instances.',
        'SourceSecurityGroup.OwnerAlias': 'Owner of the source security '
                                          'group.',
    }

    @classmethod
    def validate_more(cls, values, path):
        health = values.get('HealthCheck')
        if isinstance(health, dict):
            interval, timeout = health.get('Interval'), \
                health.get('Timeout')
            if isinstance(interval, (int, float)) and \
                    isinstance(timeout, (int, float)) and interval < timeout:
                raise exception.InvalidTemplate(
                    'Interval must be larger than Timeout',
                    path=list(path) + ['HealthCheck', 'Interval'])
        return values

    def _address(self, server):
        try:
            found = self.clients.compute.get_server(server)
        except exception.CloudTransient:
            raise
        except exception.CloudError:
            found = None
        for entries in ((found or {}).get('addresses') or {}).values():
            for entry in entries or []:
                if isinstance(entry, dict) and \
                        str(entry.get('version', 4)) == '4' and \
                        entry.get('addr'):
                    return entry['addr']
        return '0.0.0.0'

    def template(self):
        tmpl = super().template()
        server = tmpl['Resources'][self.server]
        instances = self.properties.get('Instances')
        if instances:
            files = server['Metadata']['AWS::CloudFormation::Init'][
                'config']['files']
            files['/etc/haproxy/haproxy.cfg']['content'] = haproxy_config(
                self.properties['Listeners'][0],
                self.properties.get('HealthCheck'),
                [self._address(i) for i in instances])
        groups = self.properties.get('SecurityGroups')
        if groups:
            server['Properties']['SecurityGroups'] = list(groups)
        return tmpl

    def attributes_from(self, outputs, observed):
        out = {k: '' for k in self.attributes_schema}
        out['DNSName'] = outputs.get('PublicIp')
        return out

    def reference_id(self):
        # Heat: the resource's name
        return self.name
