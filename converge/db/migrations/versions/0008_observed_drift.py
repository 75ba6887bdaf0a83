"""resources: when they were last observed, and how they had drifted;
stacks' continuous convergence policies; the fact stores

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('resources') as batch_op:
        batch_op.add_column(sa.Column('observed_at', sa.Double(),
                                      nullable=True))
        batch_op.add_column(sa.Column('drift', sa.Text(), nullable=True))
    op.create_table(
        'converge_policies',
        sa.Column('stack_id', sa.String(length=36), nullable=False),
        sa.Column('mode', sa.String(length=16), nullable=False),
        sa.Column('interval', sa.Double(), nullable=False),
        sa.Column('jitter', sa.Double(), nullable=False),
        sa.Column('next_at', sa.Double(), nullable=False),
        sa.Column('failures', sa.Integer(), nullable=False),
        sa.Column('repair_traversal', sa.String(length=36), nullable=True),
        sa.ForeignKeyConstraint(['stack_id'], ['stacks.id'],
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('stack_id'))
    op.create_index(op.f('ix_converge_policies_next_at'),
                    'converge_policies', ['next_at'], unique=False)
    op.create_table(
        'facts',
        sa.Column('stack_id', sa.String(length=36), nullable=False),
        sa.Column('key', sa.String(length=255), nullable=False),
        sa.Column('value', sa.JSON(), nullable=True),
        sa.Column('writer', sa.String(length=64), nullable=True),
        sa.Column('updated_at', sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(['stack_id'], ['stacks.id'],
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('stack_id', 'key'))
    op.create_table(
        'fact_refreshes',
        sa.Column('stack_id', sa.String(length=36), nullable=False),
        sa.Column('keys', sa.JSON(), nullable=False),
        sa.Column('since', sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(['stack_id'], ['stacks.id'],
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('stack_id'))


def downgrade():
    op.drop_table('fact_refreshes')
    op.drop_table('facts')
    op.drop_index(op.f('ix_converge_policies_next_at'),
                  table_name='converge_policies')
    op.drop_table('converge_policies')
    with op.batch_alter_table('resources') as batch_op:
        batch_op.drop_column('drift')
        batch_op.drop_column('observed_at')
