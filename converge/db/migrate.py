"""Schema migrations (Alembic): `converge-manage db sync` and self-migration."""

import os

from alembic import command
from alembic import config as alembic_config
from alembic import migration
from alembic import script as alembic_script

HERE = os.path.join(os.path.dirname(__file__), 'migrations')


def _config(url):
    cfg = alembic_config.Config(os.path.join(HERE, 'alembic.ini'))
    cfg.set_main_option('script_location', HERE)
    cfg.set_main_option('sqlalchemy.url', url.replace('%', '%%'))
    return cfg


def head():
    return alembic_script.ScriptDirectory.from_config(
        _config('sqlite://')).get_current_head()


def current(database):
    with database.writer_engine.connect() as conn:
        return migration.MigrationContext.configure(conn).get_current_revision()


def sync(database, revision='head'):
    """Upgrade the schema to `revision`; a no-op when already there."""
    cfg = _config(database.url)
    with database.writer_engine.begin() as conn:
        cfg.attributes['connection'] = conn
        command.upgrade(cfg, revision)


def ensure(database):
    """Embedded default: migrate on first use, cheaply when up to date."""
    if current(database) != head():
        sync(database)
