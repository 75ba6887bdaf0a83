"""nested stacks: a stack's parent, the resource that owns it, its depth

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""
import sqlalchemy as sa
from alembic import op


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('stacks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_id', sa.String(36),
                                      nullable=True))
        batch_op.add_column(sa.Column('parent_resource', sa.String(255),
                                      nullable=True))
        batch_op.add_column(sa.Column('nested_depth', sa.Integer(),
                                      nullable=False, server_default='0'))
        batch_op.create_index('ix_stacks_parent_id', ['parent_id'],
                              unique=False)


def downgrade():
    with op.batch_alter_table('stacks', schema=None) as batch_op:
        batch_op.drop_index('ix_stacks_parent_id')
        batch_op.drop_column('nested_depth')
        batch_op.drop_column('parent_resource')
        batch_op.drop_column('parent_id')
