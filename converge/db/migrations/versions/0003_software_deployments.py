"""software deployments, day-2 deployment actions, agent credentials,
wait condition signals

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('agent_credentials',
    sa.Column('agent_id', sa.String(length=36), nullable=False),
    sa.Column('stack_id', sa.String(length=36), nullable=True),
    sa.Column('project_id', sa.String(length=64), nullable=False),
    sa.Column('resource_name', sa.String(length=255), nullable=True),
    sa.Column('server_id', sa.String(length=255), nullable=True),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.Double(), nullable=False),
    sa.Column('revoked_at', sa.Double(), nullable=True),
    sa.PrimaryKeyConstraint('agent_id')
    )
    with op.batch_alter_table('agent_credentials', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_agent_credentials_server_id'), ['server_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_agent_credentials_stack_id'), ['stack_id'], unique=False)

    op.create_table('engine_secrets',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('value', sa.String(length=255), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    op.create_table('software_deployments',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('stack_id', sa.String(length=36), nullable=True),
    sa.Column('project_id', sa.String(length=64), nullable=False),
    sa.Column('resource_name', sa.String(length=255), nullable=True),
    sa.Column('server_id', sa.String(length=255), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('member', sa.String(length=255), nullable=True),
    sa.Column('wake_event', sa.String(length=255), nullable=True),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('action', sa.String(length=32), nullable=False),
    sa.Column('run', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('status_reason', sa.Text(), nullable=False),
    sa.Column('input_values', sa.JSON(), nullable=False),
    sa.Column('output_values', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('software_deployments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_software_deployments_server_id'), ['server_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_software_deployments_stack_id'), ['stack_id'], unique=False)

    op.create_table('deployment_actions',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('deployment_id', sa.String(length=36), nullable=False),
    sa.Column('stack_id', sa.String(length=36), nullable=True),
    sa.Column('project_id', sa.String(length=64), nullable=False),
    sa.Column('resource_name', sa.String(length=255), nullable=True),
    sa.Column('member', sa.String(length=255), nullable=True),
    sa.Column('server_id', sa.String(length=255), nullable=False),
    sa.Column('action', sa.String(length=64), nullable=False),
    sa.Column('input_values', sa.JSON(), nullable=False),
    sa.Column('run', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('status_reason', sa.Text(), nullable=False),
    sa.Column('output_values', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('deployment_actions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_deployment_actions_deployment_id'), ['deployment_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_deployment_actions_run'), ['run'], unique=False)
        batch_op.create_index(batch_op.f('ix_deployment_actions_stack_id'), ['stack_id'], unique=False)

    op.create_table('wait_condition_signals',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('handle_id', sa.String(length=36), nullable=False),
    sa.Column('stack_id', sa.String(length=36), nullable=True),
    sa.Column('signal_id', sa.String(length=255), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('data', sa.Text(), nullable=True),
    sa.Column('created_at', sa.Double(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('handle_id', 'signal_id', name='uq_wait_condition_signal')
    )
    with op.batch_alter_table('wait_condition_signals', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_wait_condition_signals_handle_id'), ['handle_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_wait_condition_signals_stack_id'), ['stack_id'], unique=False)



def downgrade():
    with op.batch_alter_table('wait_condition_signals', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_wait_condition_signals_stack_id'))
        batch_op.drop_index(batch_op.f('ix_wait_condition_signals_handle_id'))

    op.drop_table('wait_condition_signals')
    with op.batch_alter_table('software_deployments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_software_deployments_stack_id'))
        batch_op.drop_index(batch_op.f('ix_software_deployments_server_id'))

    op.drop_table('software_deployments')
    with op.batch_alter_table('deployment_actions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_deployment_actions_stack_id'))
        batch_op.drop_index(batch_op.f('ix_deployment_actions_run'))
        batch_op.drop_index(batch_op.f('ix_deployment_actions_deployment_id'))
    op.drop_table('deployment_actions')
    op.drop_table('engine_secrets')
    with op.batch_alter_table('agent_credentials', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_agent_credentials_stack_id'))
        batch_op.drop_index(batch_op.f('ix_agent_credentials_server_id'))

    op.drop_table('agent_credentials')
