"""Files in and out: reading a user's inputs (bounded, regular files only, errors naming file and line) and writing
outputs and state (all or nothing, never through a link, private where they hold state)."""
