"""The nested templates of the AWS types converge makes as a stack of
their own (AWS::RDS::DBInstance, AWS::ElasticLoadBalancing::LoadBalancer),
shipped with the package."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def text(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()
