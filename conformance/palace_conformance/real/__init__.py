"""The real mempalace server beside the kit: finding an installed one, the environment that
isolates it, and the offline embedding stub its vector writes need (docs/real-server.md)."""
