"""resources: the digest of the definition a row last converged to (an
update visits only what changed and what reads it)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('resources') as batch_op:
        batch_op.add_column(sa.Column('applied_digest', sa.String(64),
                                      nullable=True))


def downgrade():
    with op.batch_alter_table('resources') as batch_op:
        batch_op.drop_column('applied_digest')
