"""memrefine judge commands."""

from __future__ import annotations

import click

from . import cli, db_option, emit, json_option, log, open_store
