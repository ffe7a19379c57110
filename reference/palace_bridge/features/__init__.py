"""The bridge's harness features, one module each: wake-up, feeding, diary, provenance, mailbox.

Each feature is policy as plain code over host events and an injectable clock; the I/O it needs
(palace calls, a subprocess, messages to the host) goes through the narrow ports in ``ports``.
"""
