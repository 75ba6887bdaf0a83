"""resources: the deletion policy a row was last converged with (cleaning
it up needs no parse of the template version it came from)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('resources') as batch_op:
        batch_op.add_column(sa.Column('deletion_policy', sa.String(16),
                                      nullable=True))


def downgrade():
    with op.batch_alter_table('resources') as batch_op:
        batch_op.drop_column('deletion_policy')
