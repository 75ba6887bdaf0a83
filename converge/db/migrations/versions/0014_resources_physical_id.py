"""resources: an index on physical_id (Heat's API names a deployment
group's nested stack by the group's physical id)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""
from alembic import op


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('resources') as batch_op:
        batch_op.create_index('ix_resources_physical_id', ['physical_id'],
                              unique=False)


def downgrade():
    with op.batch_alter_table('resources') as batch_op:
        batch_op.drop_index('ix_resources_physical_id')
