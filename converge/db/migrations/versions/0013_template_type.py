"""resources: the type as the template names it (shown to users, as Heat
shows it; `type` stays the plug-in's)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('resources') as batch_op:
        batch_op.add_column(sa.Column('template_type', sa.String(255),
                                      nullable=True))


def downgrade():
    with op.batch_alter_table('resources') as batch_op:
        batch_op.drop_column('template_type')
