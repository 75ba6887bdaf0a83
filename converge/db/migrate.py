"""Schema migrations (Alembic): `converge-manage db sync` and self-migration.

Alembic (with Mako and Pygments behind it) is imported only to migrate or
to ask it something: every embedded command checks the schema on start,
and importing it there cost each command about a tenth of a second. The
check itself reads the version table and the version files' own lines."""

import os
import re

import sqlalchemy as sa

HERE = os.path.join(os.path.dirname(__file__), 'migrations')
VERSIONS = os.path.join(HERE, 'versions')


def _config(url):
    from alembic import config as alembic_config
    cfg = alembic_config.Config(os.path.join(HERE, 'alembic.ini'))
    cfg.set_main_option('script_location', HERE)
    cfg.set_main_option('sqlalchemy.url', url.replace('%', '%%'))
    return cfg


def head():
    from alembic import script as alembic_script
    return alembic_script.ScriptDirectory.from_config(
        _config('sqlite://')).get_current_head()


def current(database):
    from alembic import migration
    with database.writer_engine.connect() as conn:
        context = migration.MigrationContext.configure(conn)
        return context.get_current_revision()


def sync(database, revision='head'):
    """Upgrade the schema to `revision`; a no-op when already there."""
    from alembic import command
    cfg = _config(database.url)
    with database.writer_engine.begin() as conn:
        cfg.attributes['connection'] = conn
        command.upgrade(cfg, revision)


_REVISION = re.compile(r"^revision = '(\w+)'$", re.M)
_DOWN = re.compile(r"^down_revision = (?:None|'(\w+)')$", re.M)


def _declared():
    """(revision, down_revision) of each version file, as its own lines
    declare them; None when a file says otherwise (then only Alembic
    can tell)."""
    found = []
    for name in os.listdir(VERSIONS):
        if not name.endswith('.py'):
            continue
        with open(os.path.join(VERSIONS, name)) as f:
            text = f.read()
        rev, down = _REVISION.findall(text), _DOWN.findall(text)
        if len(rev) != 1 or len(down) != 1:
            return None
        found.append((rev[0], down[0]))
    return found


def declared_head():
    """The head as the version files declare it (one chain), or None."""
    found = _declared()
    if found is None:
        return None
    heads = {r for r, _ in found} - {d for _, d in found}
    return heads.pop() if len(heads) == 1 else None


def _stored(database):
    """The revision in the version table (None: no table, no row)."""
    with database.writer_engine.connect() as conn:
        if not sa.inspect(conn).has_table('alembic_version'):
            return None
        return conn.execute(
            sa.text('SELECT version_num FROM alembic_version')).scalar()


def require_head(database):
    """Refuse a database whose schema is not this converge's (a service
    of another version would fail its units with database errors, retried
    for as long as it lives): SchemaMismatch saying what to do; nothing
    when the schema is at head."""
    from converge import exception
    stored = _stored(database)
    want = declared_head() or head()
    if stored == want:
        return
    where = database.writer_engine.url.render_as_string(hide_password=True)
    if stored is None:
        raise exception.SchemaMismatch(
            'The database %s holds no converge schema: run `converge-manage '
            '--config-file ... db sync` first' % where)
    if stored in {r for r, _ in _declared() or ()}:
        raise exception.SchemaMismatch(
            'The database %s is at schema revision %s; this converge needs '
            '%s: run `converge-manage --config-file ... db sync` '
            '(docs/install.md, "Upgrades")' % (where, stored, want))
    raise exception.SchemaMismatch(
        'The database %s is at schema revision %s, which this converge '
        '(schema %s) does not know: a newer converge migrated it. Install '
        'that version on this host too (docs/install.md, "Upgrades")'
        % (where, stored, want))


def ensure(database):
    """Embedded default: migrate on first use, cheaply when up to date."""
    stored = _stored(database)
    if stored is not None and stored == declared_head():
        return
    if current(database) != head():
        sync(database)
