"""The pure scheduling core: which phase starts now (``Policy``), a simulator that drives it, and
dependency order over a subset of phases. No processes, no clock."""
