"""sync_shards: the inputs of a node with many, counted in shards (no one
row is counted down by every input)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'sync_shards',
        sa.Column('traversal_id', sa.String(36),
                  sa.ForeignKey('traversals.id', ondelete='CASCADE'),
                  nullable=False),
        sa.Column('node', sa.String(300), nullable=False),
        sa.Column('shard', sa.Integer(), autoincrement=False,
                  nullable=False),
        sa.Column('remaining', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('traversal_id', 'node', 'shard'))


def downgrade():
    op.drop_table('sync_shards')
