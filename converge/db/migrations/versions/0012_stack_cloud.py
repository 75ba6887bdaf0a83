"""stacks: the cloud a stack lives in (a clouds.yaml name; NULL for the
simulated cloud)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('stacks') as batch_op:
        batch_op.add_column(sa.Column('cloud', sa.String(255),
                                      nullable=True))


def downgrade():
    with op.batch_alter_table('stacks') as batch_op:
        batch_op.drop_column('cloud')
