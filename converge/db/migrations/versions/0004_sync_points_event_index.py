"""the nodes waiting for an event found by (event, stack)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""
from alembic import op


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('sync_points', schema=None) as batch_op:
        batch_op.drop_index('ix_sync_points_wait_event')
        batch_op.create_index('ix_sync_points_wait_event_stack',
                              ['wait_event', 'stack_id'], unique=False)


def downgrade():
    with op.batch_alter_table('sync_points', schema=None) as batch_op:
        batch_op.drop_index('ix_sync_points_wait_event_stack')
        batch_op.create_index('ix_sync_points_wait_event', ['wait_event'],
                              unique=False)
