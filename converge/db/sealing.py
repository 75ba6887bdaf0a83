"""Values kept encrypted in the database (`[DEFAULT]
auth_encryption_key`, `encrypt_parameters_and_properties`): what a
stack keeps that may carry a hidden parameter's value or a credential
(its parameters, its resources' properties and attributes, deployment
inputs...).

A `Sealed` column is JSON as before; with a key at hand, a value is
written as ``{"$fernet": "<Fernet token of its JSON>"}`` (AES-128-CBC
and HMAC-SHA256, the `cryptography` library's) and read back as the
value. A row written in clear (before the key, or with the option off)
reads as it was, so an existing database works unchanged and is
encrypted row by row as rows are written again.

The key: `auth_encryption_key` (any text, stretched with SHA-256 into
Fernet's key), else, for the embedded database, a key made on first use
in the home (0600). It is never kept in the database it protects.
"""

import base64
import collections
import hashlib
import json
import os
import secrets
import threading
import time

from sqlalchemy import JSON
from sqlalchemy import types

from converge import exception
from converge import private

#: the key of the one-key map a sealed value is stored as
SEALED = '$fernet'
#: the embedded home's key file
KEY_FILE = 'auth_encryption.key'

_LOCK = threading.Lock()
#: (key text) -> Fernet; (key file, its inode and mtime) -> key text
_FERNETS = {}
_FILES = {}
#: key file -> (when last looked at, its text): a key file is looked at
#: again after KEY_RECHECK seconds, not on every value (a stat per value
#: was a twentieth of a TripleO create's CPU)
_CHECKED = {}
KEY_RECHECK = 5.0
#: values read back (a resource's row is read by every unit that needs
#: it): token -> the plain JSON, least recently used dropped beyond
#: OPENED_BYTES; a value over OPENED_LARGEST is not kept. By token alone,
#: the key not looked up again: a token opened here was opened with this
#: process's key (each token's IV is random, so another key's token is
#: never the same text)
_OPENED = collections.OrderedDict()
_OPENED_SIZE = [0]
OPENED_BYTES = 16 * 1024 * 1024
OPENED_LARGEST = 256 * 1024


def _conf():
    from converge import conf as conf_mod   # not at import: models
    return conf_mod                          # are imported by tools too


def _home_key(make):
    path = os.path.join(_conf().home_dir(), KEY_FILE)
    checked = _CHECKED.get(path)
    if checked is not None and time.monotonic() - checked[0] < KEY_RECHECK:
        return checked[1]
    text = _read_home_key(path, make)
    if text is not None:
        _CHECKED[path] = (time.monotonic(), text)
    return text


def _read_home_key(path, make):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not make:
            return None
        with _LOCK:
            if not os.path.exists(path):
                private.folder(os.path.dirname(path))
                try:   # O_EXCL: of two processes making it, one wins
                    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                                 0o600)
                except FileExistsError:
                    pass
                else:
                    with os.fdopen(fd, 'w') as f:
                        f.write(secrets.token_urlsafe(32) + '\n')
        st = os.stat(path)
    stamp = (path, st.st_ino, st.st_mtime_ns, st.st_size)
    text = _FILES.get(stamp)
    if text is None:
        with open(path) as f:
            text = f.read().strip()
        if not text:
            return None   # being written by another process just now
        _FILES[stamp] = text
    return text


def key_text(writing=False):
    """The key's text, or None when there is none (for writing: or the
    option is off)."""
    conf = _conf().CONF
    if writing and not conf.encrypt_parameters_and_properties:
        return None
    if conf.auth_encryption_key:
        return conf.auth_encryption_key
    if conf.database.connection:
        return None
    return _home_key(make=writing)


def _fernet(text):
    found = _FERNETS.get(text)
    if found is None:
        from cryptography import fernet
        found = fernet.Fernet(base64.urlsafe_b64encode(
            hashlib.sha256(text.encode('utf-8')).digest()))
        _FERNETS[text] = found
    return found


def seal(value):
    """`value` as it is stored: sealed when a key is at hand. An empty
    value carries nothing to hide and stays as it is (most resources'
    data and attributes: a Fernet token costs tens of microseconds)."""
    if value is None or (isinstance(value, (dict, list, str))
                         and not value):
        return value
    text = key_text(writing=True)
    if text is None:
        return value
    data = json.dumps(value, separators=(',', ':')).encode('utf-8')
    token = _fernet(text).encrypt(data).decode('ascii')
    _keep_opened(token, data)   # read back soon, by the units after
    return {SEALED: token}


#: what a text sealed as text begins with (a String column: the engine's
#: secrets, hex that never begins so)
SEALED_TEXT = 'fernet:'


def seal_text(text):
    """`text` as a String column keeps it: sealed (SEALED_TEXT and the
    token) when a key is at hand, else as it is."""
    key = key_text(writing=True)
    if key is None or not text:
        return text
    return SEALED_TEXT + _fernet(key).encrypt(
        text.encode('utf-8')).decode('ascii')


def unseal_text(value):
    """A String column's text as it was written."""
    if not isinstance(value, str) or not value.startswith(SEALED_TEXT):
        return value
    return _open(value[len(SEALED_TEXT):]).decode('utf-8')


def is_sealed(value):
    return isinstance(value, dict) and len(value) == 1 and SEALED in value


def unseal(value):
    """A stored value as it was written."""
    if not is_sealed(value):
        return value
    token = value[SEALED]
    with _LOCK:
        data = _OPENED.get(token)
        if data is not None:
            _OPENED.move_to_end(token)
    if data is None:
        data = _open(token)
        _keep_opened(token, data)
    return json.loads(data)   # a value of its own for each reader


def _open(token):
    text = key_text()
    if text is None:
        raise exception.ConvergeError(
            'The database holds encrypted values and no key is '
            'configured to read them ([DEFAULT] auth_encryption_key)')
    from cryptography import fernet
    try:
        return _fernet(text).decrypt(token.encode('ascii'))
    except fernet.InvalidToken:
        raise exception.ConvergeError(
            'The database holds values encrypted with another key than '
            '[DEFAULT] auth_encryption_key')


def _keep_opened(key, data):
    if len(data) > OPENED_LARGEST:
        return
    with _LOCK:
        if key in _OPENED:
            return
        _OPENED[key] = data
        _OPENED_SIZE[0] += len(data)
        while _OPENED_SIZE[0] > OPENED_BYTES:
            _, dropped = _OPENED.popitem(last=False)
            _OPENED_SIZE[0] -= len(dropped)


class Sealed(types.TypeDecorator):
    """A JSON column whose values are sealed at rest."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return seal(value)

    def process_result_value(self, value, dialect):
        return unseal(value)


def seal_all(database, batch=500):
    """Encrypt every value of the database's Sealed columns that is still
    in clear (written before a key, or with the option off): the
    `converge-manage db encrypt` of an existing database. Returns how
    many values it sealed. Needs a key, and the option on."""
    if key_text(writing=True) is None:
        raise exception.ConvergeError(
            'Nothing to encrypt with: set [DEFAULT] auth_encryption_key '
            '(and encrypt_parameters_and_properties = true)')
    import sqlalchemy as sa
    from converge.db import models
    sealed = 0
    for table in models.Base.metadata.sorted_tables:
        columns = [c for c in table.c if isinstance(c.type, Sealed)]
        if not columns:
            continue
        keys = list(table.primary_key.columns)
        last = None
        while True:
            # the stored JSON as it is (not through Sealed), a page at a
            # time in key order
            q = sa.select(*keys, *[sa.type_coerce(c, JSON).label(c.name)
                                   for c in columns]).order_by(*keys)
            if last is not None:
                q = q.where(sa.tuple_(*keys) > sa.tuple_(*last))
            with database.writer_engine.begin() as conn:
                rows = conn.execute(q.limit(batch)).all()
                for row in rows:
                    clear = {c.name: row._mapping[c.name] for c in columns
                             if row._mapping[c.name] is not None and
                             not is_sealed(row._mapping[c.name])}
                    if clear:
                        conn.execute(table.update().where(*[
                            k == row._mapping[k.name] for k in keys]
                        ).values(**clear))
                        sealed += len(clear)
            if len(rows) < batch:
                break
            last = [rows[-1]._mapping[k.name] for k in keys]
    # the engine's own secrets (the key agent tokens derive from): text
    # in a String column, sealed as text
    secrets_table = models.EngineSecret.__table__
    with database.writer_engine.begin() as conn:
        for name, value in conn.execute(sa.select(
                secrets_table.c.name, secrets_table.c.value)).all():
            if value and not value.startswith(SEALED_TEXT):
                conn.execute(secrets_table.update().where(
                    secrets_table.c.name == name).values(
                        value=seal_text(value)))
                sealed += 1
    if database.is_sqlite:
        # what the rows held in clear is still in the file's free pages
        # and its write-ahead log until they are rewritten
        # (on the driver's connection: the engine begins a transaction
        # on every use of its own, and VACUUM runs outside any)
        raw = database.writer_engine.raw_connection()
        try:
            raw.driver_connection.execute('VACUUM')
            raw.driver_connection.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        finally:
            raw.close()
    return sealed
