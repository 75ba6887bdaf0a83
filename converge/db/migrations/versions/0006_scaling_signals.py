"""scaling signals: what each signal to an OS::Heat::ScalingPolicy did

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'scaling_signals',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('stack_id', sa.String(length=36), nullable=False),
        sa.Column('policy', sa.String(length=255), nullable=False),
        sa.Column('signal_id', sa.String(length=255), nullable=True),
        sa.Column('group_key', sa.String(length=36), nullable=True),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('capacity', sa.Integer(), nullable=True),
        sa.Column('cooldown', sa.Double(), nullable=True),
        sa.Column('created_at', sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('stack_id', 'policy', 'signal_id',
                            name='uq_scaling_signal'))
    with op.batch_alter_table('scaling_signals', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_scaling_signals_stack_id'),
                              ['stack_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_scaling_signals_group_key'),
                              ['group_key'], unique=False)


def downgrade():
    with op.batch_alter_table('scaling_signals', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_scaling_signals_group_key'))
        batch_op.drop_index(batch_op.f('ix_scaling_signals_stack_id'))
    op.drop_table('scaling_signals')
