"""The engine's state: SQLAlchemy 2 models, Alembic migrations, queries."""
