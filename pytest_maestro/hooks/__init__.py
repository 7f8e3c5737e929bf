"""The pytest layer: the hooks of one ``pytest --maestro`` run, translating between pytest and
xdist and the cores below. Decides nothing itself; only ``plugin.py`` imports it."""
