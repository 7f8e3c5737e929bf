"""The pure scheduling core: which phase starts now (``Policy``), the jobs it schedules over the
DAG kernel, and a simulator that drives it. No processes, no clock."""
