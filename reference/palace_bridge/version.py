"""The bridge's version, in a module of its own so the policy modules can name it cheaply."""

__version__ = "0.1.0"
