"""Gavel-style policies: an allocator of time fractions, realised round by round by Gavel's mechanism."""
