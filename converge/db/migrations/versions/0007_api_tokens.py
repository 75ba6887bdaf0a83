"""api tokens: converge's own tokens for the REST API (hashed); software
configs belong to a project; stack snapshots; request counts

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'api_tokens',
        sa.Column('id', sa.String(length=36), nullable=False),
        sa.Column('token_hash', sa.String(length=64), nullable=False),
        sa.Column('project_id', sa.String(length=64), nullable=False),
        sa.Column('user_id', sa.String(length=64), nullable=True),
        sa.Column('roles', sa.JSON(), nullable=False),
        sa.Column('description', sa.Text(), nullable=False),
        sa.Column('created_at', sa.Double(), nullable=False),
        sa.Column('expires_at', sa.Double(), nullable=True),
        sa.Column('revoked_at', sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('token_hash'))
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_tokens_project_id'),
                              ['project_id'], unique=False)
    with op.batch_alter_table('software_configs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('project_id', sa.String(length=64),
                                      nullable=True))
        batch_op.create_index(batch_op.f('ix_software_configs_project_id'),
                              ['project_id'], unique=False)
    op.create_table(
        'stack_snapshots',
        sa.Column('id', sa.String(length=36), nullable=False),
        sa.Column('stack_id', sa.String(length=36), nullable=False),
        sa.Column('project_id', sa.String(length=64), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('status_reason', sa.Text(), nullable=False),
        sa.Column('data', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint('id'))
    with op.batch_alter_table('stack_snapshots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_stack_snapshots_stack_id'),
                              ['stack_id'], unique=False)
    op.create_table(
        'api_rates',
        sa.Column('caller', sa.String(length=160), nullable=False),
        sa.Column('minute', sa.Integer(), nullable=False),
        sa.Column('count', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('caller', 'minute'))


def downgrade():
    op.drop_table('api_rates')
    with op.batch_alter_table('stack_snapshots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_stack_snapshots_stack_id'))
    op.drop_table('stack_snapshots')
    with op.batch_alter_table('software_configs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_software_configs_project_id'))
        batch_op.drop_column('project_id')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_tokens_project_id'))
    op.drop_table('api_tokens')
