"""The database schema, for the operator's `converge-manage db`."""

from converge import conf as conf_mod
from converge.db import migrate
from converge.db import session


def _database():
    return session.get(conf_mod.database_url())


def sync(revision='head'):
    """Upgrade the schema to `revision`; returns the revision reached."""
    database = _database()
    migrate.sync(database, revision)
    return migrate.current(database)


def version():
    """The schema's revision, or None for an empty database."""
    return migrate.current(_database())


def encrypt():
    """Encrypt the values still in clear (db/sealing.py); how many."""
    from converge.db import sealing
    database = _database()
    migrate.ensure(database)
    return sealing.seal_all(database)
