"""One phase's attempt loop: the runner, its outcome, the call of an agent runtime, the prompt,
the spend ledger, and what a phase says while it runs and when it ends."""
