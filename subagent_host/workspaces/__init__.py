"""Git worktrees for isolated children (`isolation: "worktree"`, protocol.md §8.7).

A child asked to be isolated runs in a worktree of its own, on a branch of its
own, made from the repository's `HEAD`; when it ends, what it left there is
measured (commits and uncommitted changes), and a worktree with nothing in it
is removed with its branch. All git work of the server is here: `git.py` runs
git as a child process off the loop with a bounded wait, `worktrees.py` makes,
measures, lists and removes worktrees. Imports nothing of ours but `values`.
"""
