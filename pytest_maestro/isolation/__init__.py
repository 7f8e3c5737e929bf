"""Isolated phases: a git worktree of their own, their result merged back into the user's tree,
and what git shares between worktrees put back as the user had it."""
