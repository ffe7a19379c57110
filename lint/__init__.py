"""Lint plugins of the project's own (import-linter contract types); not shipped."""
