"""`python -m subagent_host`: the same as the `subagent-host` command."""

from subagent_host.cli import main

raise SystemExit(main())
