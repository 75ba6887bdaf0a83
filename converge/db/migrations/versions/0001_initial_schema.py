"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-22
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('stack_id', sa.String(length=36), nullable=False),
    sa.Column('traversal_id', sa.String(length=36), nullable=True),
    sa.Column('resource_name', sa.String(length=255), nullable=False),
    sa.Column('resource_type', sa.String(length=255), nullable=False),
    sa.Column('physical_id', sa.String(length=255), nullable=True),
    sa.Column('action', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('timestamp', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index('ix_events_stack_id_id', ['stack_id', 'id'], unique=False)

    op.create_table('software_configs',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('group', sa.String(length=255), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('templates',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('stack_id', sa.String(length=36), nullable=True),
    sa.Column('bundle', sa.JSON(), nullable=False),
    sa.Column('parameters', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('templates', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_templates_stack_id'), ['stack_id'], unique=False)

    op.create_table('stacks',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('deleted_marker', sa.String(length=36), nullable=False),
    sa.Column('project_id', sa.String(length=64), nullable=False),
    sa.Column('action', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('status_reason', sa.Text(), nullable=False),
    sa.Column('template_id', sa.Integer(), nullable=True),
    sa.Column('prev_template_id', sa.Integer(), nullable=True),
    sa.Column('current_traversal', sa.String(length=36), nullable=True),
    sa.Column('disable_rollback', sa.Boolean(), nullable=False),
    sa.Column('timeout_mins', sa.Integer(), nullable=True),
    sa.Column('tags', sa.JSON(), nullable=False),
    sa.Column('outputs', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['prev_template_id'], ['templates.id'], ),
    sa.ForeignKeyConstraint(['template_id'], ['templates.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name', 'deleted_marker', name='uq_stacks_name_live')
    )
    op.create_table('resources',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('stack_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('type', sa.String(length=255), nullable=False),
    sa.Column('action', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('status_reason', sa.Text(), nullable=False),
    sa.Column('physical_id', sa.String(length=255), nullable=True),
    sa.Column('reference_id', sa.Text(), nullable=True),
    sa.Column('template_id', sa.Integer(), nullable=True),
    sa.Column('properties', sa.JSON(), nullable=True),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.Column('attributes', sa.JSON(), nullable=True),
    sa.Column('observed', sa.JSON(), nullable=True),
    sa.Column('requires', sa.JSON(), nullable=False),
    sa.Column('replaces', sa.Integer(), nullable=True),
    sa.Column('replaced_by', sa.Integer(), nullable=True),
    sa.Column('engine_id', sa.String(length=64), nullable=True),
    sa.Column('atomic_key', sa.Integer(), nullable=False),
    sa.Column('traversal_id', sa.String(length=36), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['stack_id'], ['stacks.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('uuid')
    )
    with op.batch_alter_table('resources', schema=None) as batch_op:
        batch_op.create_index('ix_resources_stack_name', ['stack_id', 'name'], unique=False)

    op.create_table('traversals',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('stack_id', sa.String(length=36), nullable=False),
    sa.Column('action', sa.String(length=16), nullable=False),
    sa.Column('template_id', sa.Integer(), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('options', sa.JSON(), nullable=False),
    sa.Column('total', sa.Integer(), nullable=False),
    sa.Column('failure', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['stack_id'], ['stacks.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('traversals', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_traversals_stack_id'), ['stack_id'], unique=False)

    op.create_table('sync_points',
    sa.Column('traversal_id', sa.String(length=36), nullable=False),
    sa.Column('node', sa.String(length=300), nullable=False),
    sa.Column('stack_id', sa.String(length=36), nullable=False),
    sa.Column('resource_id', sa.Integer(), nullable=True),
    sa.Column('remaining', sa.Integer(), nullable=False),
    sa.Column('dependents', sa.JSON(), nullable=False),
    sa.Column('done', sa.Boolean(), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['traversal_id'], ['traversals.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('traversal_id', 'node')
    )
    with op.batch_alter_table('sync_points', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sync_points_stack_id'), ['stack_id'], unique=False)



def downgrade():
    with op.batch_alter_table('sync_points', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sync_points_stack_id'))

    op.drop_table('sync_points')
    with op.batch_alter_table('traversals', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_traversals_stack_id'))

    op.drop_table('traversals')
    with op.batch_alter_table('resources', schema=None) as batch_op:
        batch_op.drop_index('ix_resources_stack_name')

    op.drop_table('resources')
    op.drop_table('stacks')
    with op.batch_alter_table('templates', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_templates_stack_id'))

    op.drop_table('templates')
    op.drop_table('software_configs')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index('ix_events_stack_id_id')

    op.drop_table('events')
