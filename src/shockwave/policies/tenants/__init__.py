"""Tenants: one cluster shared between teams by weight, caps and guarantees per GPU type, then by any policy."""
