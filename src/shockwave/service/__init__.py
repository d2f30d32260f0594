"""The scheduler service: job specs, their SQLite store, the HTTP API the CLI talks to, and the CLI's client."""
