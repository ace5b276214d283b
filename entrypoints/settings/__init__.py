"""Configuration from WSFLEET_* environment variables: the table, the loader, the docs."""

from entrypoints.settings.load import Settings, SettingsError, load_settings
from entrypoints.settings.table import BY_NAME, PREFIX, ROUTER, SETTINGS, WORKER, Setting

__all__ = [
    "BY_NAME",
    "PREFIX",
    "ROUTER",
    "SETTINGS",
    "WORKER",
    "Setting",
    "Settings",
    "SettingsError",
    "load_settings",
]
