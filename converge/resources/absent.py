"""Heat's resource types of the OpenStack services converge does not
drive (no plug-in of converge's, no driver): by the service's client
name, as Heat's resources name it (``default_client_name``).

Heat answers a template using one of these, on a cloud without that
service, with ResourceTypeUnavailable (HEAT-E99001, a 400) naming the
service, and leaves them out of `resource-type-list`. converge has none
of these services, so it answers the same for every one of them; a type
no OpenStack service has stays an unknown type.
"""

_BY_SERVICE = {
    'aodh': ('Alarm', 'CombinationAlarm', 'CompositeAlarm', 'EventAlarm',
             'GnocchiAggregationByMetricsAlarm',
             'GnocchiAggregationByResourcesAlarm', 'GnocchiResourcesAlarm',
             'LBMemberHealthAlarm', 'PrometheusAlarm'),
    'barbican': ('CertificateContainer', 'GenericContainer', 'Order',
                 'RSAContainer', 'Secret'),
    'blazar': ('Host', 'Lease'),
    'designate': ('Domain', 'Record', 'RecordSet', 'Zone'),
    'ironic': ('Port',),
    'magnum': ('Bay', 'BayModel', 'Cluster', 'ClusterTemplate'),
    'manila': ('SecurityService', 'Share', 'ShareNetwork', 'ShareType'),
    'mistral': ('CronTrigger', 'ExternalResource', 'Workflow'),
    'monasca': ('AlarmDefinition', 'Notification'),
    'octavia': ('AvailabilityZone', 'AvailabilityZoneProfile', 'Flavor',
                'FlavorProfile', 'HealthMonitor', 'Listener', 'LoadBalancer',
                'Pool', 'PoolMember', 'Quota'),
    'sahara': ('Cluster', 'ClusterTemplate', 'DataSource', 'ImageRegistry',
               'Job', 'JobBinary', 'NodeGroupTemplate'),
    'senlin': ('Cluster', 'Node', 'Policy', 'Profile', 'Receiver'),
    'swift': ('Container',),
    'trove': ('Cluster', 'Instance'),
    'vitrage': ('Template',),
    'zaqar': ('MistralTrigger', 'Queue', 'SignedQueueURL', 'Subscription'),
    'zun': ('Container',),
}

#: type name -> the service's client name
SERVICE_OF = {'OS::%s::%s' % (service.capitalize(), kind): service
              for service, kinds in _BY_SERVICE.items() for kind in kinds}


def unavailable(type_name):
    """Heat's message for a type of a service converge does not drive,
    or None for any other type."""
    service = SERVICE_OF.get(type_name)
    if service is None:
        return None
    return ('ResourceTypeUnavailable: HEAT-E99001 Service %s is not '
            'available for resource type %s, reason: Service endpoint not '
            'in service catalog.' % (service, type_name))
