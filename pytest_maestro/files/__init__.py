"""The user's files: a phase's declared files snapshot before it runs and checked after, put back
all or none, and where what a restore or merge replaces is kept under a name no run reuses."""
