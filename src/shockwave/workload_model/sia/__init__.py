"""Sia's (SOSP'23) workloads and per-application profiles, read from a user's copy of its artifact.

The artifact has no licence: none of its files ship with this project. Its formats are described in our own words
in each module; tests write files of the same formats.
"""
