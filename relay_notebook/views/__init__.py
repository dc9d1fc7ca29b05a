"""Rendering: model objects in, SVG / text / MIME bundles out (no DBOS, no processes)."""
