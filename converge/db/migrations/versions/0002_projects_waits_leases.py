"""stack names unique per project; waiting nodes; leases for limits

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('stacks', schema=None) as batch_op:
        batch_op.drop_constraint('uq_stacks_name_live', type_='unique')
        batch_op.create_unique_constraint(
            'uq_stacks_project_name_live',
            ['project_id', 'name', 'deleted_marker'])

    with op.batch_alter_table('sync_points', schema=None) as batch_op:
        batch_op.add_column(sa.Column('wake_at', sa.Double(), nullable=True))
        batch_op.add_column(sa.Column('wait_event', sa.String(length=255),
                                      nullable=True))
        batch_op.create_index(batch_op.f('ix_sync_points_wake_at'),
                              ['wake_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_sync_points_wait_event'),
                              ['wait_event'], unique=False)

    op.create_table('lease_keys',
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('gen', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    op.create_table('leases',
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('holder', sa.String(length=255), nullable=False),
    sa.Column('expires_at', sa.Double(), nullable=False),
    sa.PrimaryKeyConstraint('key', 'holder')
    )
    with op.batch_alter_table('leases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_leases_expires_at'),
                              ['expires_at'], unique=False)


def downgrade():
    with op.batch_alter_table('leases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_leases_expires_at'))
    op.drop_table('leases')
    op.drop_table('lease_keys')
    with op.batch_alter_table('sync_points', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sync_points_wait_event'))
        batch_op.drop_index(batch_op.f('ix_sync_points_wake_at'))
        batch_op.drop_column('wait_event')
        batch_op.drop_column('wake_at')
    with op.batch_alter_table('stacks', schema=None) as batch_op:
        batch_op.drop_constraint('uq_stacks_project_name_live',
                                 type_='unique')
        batch_op.create_unique_constraint('uq_stacks_name_live',
                                          ['name', 'deleted_marker'])
