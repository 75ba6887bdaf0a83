"""Alembic environment: run against the connection handed in by migrate.py."""

from alembic import context

from converge.db import models

config = context.config
target_metadata = models.Base.metadata


def run_migrations_online():
    connection = config.attributes.get('connection')
    if connection is None:
        import sqlalchemy as sa
        engine = sa.create_engine(config.get_main_option('sqlalchemy.url'))
        with engine.connect() as connection:
            _run(connection)
    else:
        _run(connection)


def _run(connection):
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == 'sqlite')
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
