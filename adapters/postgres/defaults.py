"""The pool's default size, apart from db.py so that the settings table reads it without
importing asyncpg."""

DEFAULT_POOL_SIZE = 10
