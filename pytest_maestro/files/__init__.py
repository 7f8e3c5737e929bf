"""The user's files: a phase's declared files snapshot before it runs and checked after, put back
all or none, and what a restore or merge replaces kept aside."""
