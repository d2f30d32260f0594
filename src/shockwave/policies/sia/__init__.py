"""Sia (SOSP'23): GPU type and count per job from an ILP over configurations valued by goodput."""
