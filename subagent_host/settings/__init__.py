"""Configuration files: what `subagents.json` says, merged into one `Settings`.

Three files, each a JSON object with snake_case keys, merged field by field
(a later file wins per field, and command-line options beat every file):

1. the global file, `<user config dir>/subagents.json`;
2. the project's `.pi/subagents.json`, read only when the project is trusted;
3. the `--config FILE`.

    {"default_model": "sonnet", "default_effort": "high", "timeout_ms": 600000,
     "model_profiles": {"scout": {"model": "haiku", "thinking": "low"}},
     "backends": {"pi": {"executable": "/opt/pi/bin/pi"}}}

Agent and run defaults are allowed in every file. Server options (protocol.md §7:
state directory, framing, process tracking, limits, logs, trusted projects, backend programs) are
allowed only in the global and `--config` files: a project must not redirect the
state directory or the logs, trust other projects, or choose which programs run.
Paths in a file are `~`-expanded, and a relative one is taken from the file's
own directory.

The server reads the files once at start and never writes them. A missing global
or project file is simply absent. A problem (an unknown or invalid field) is a
diagnostic naming the file and the field, and that field keeps the default or the
lower-precedence file's value, except where falling back would weaken a protection:
a safety setting (`FieldRule(safety=True)`) that cannot be read, or a file that
cannot be read as a JSON object at all, is an `error` diagnostic (`Settings.refusal`),
and the server does not start (`command_line.parse_config` exits 2). This module reads files
and nothing else of ours: `command_line.py` applies the command line on top, `app.py` logs the
diagnostics.

The package, one job a module: `model` holds the public types and the ranges
(`Settings`, `ModelProfile`, `SettingsDiagnostic`); `fields` checks each field's
value and holds the table of fields; `layers` reads one file into a `Layer`;
`loader` finds the files, reads them in order and merges them into `Settings`;
`agent_filter` merges and asks the `agents` lists.
"""

# `X as X` marks each name as re-exported (PEP 484); these are the names other code imports.
from subagent_host.settings.agent_filter import AgentDisabled as AgentDisabled
from subagent_host.settings.agent_filter import AgentFilter as AgentFilter
from subagent_host.settings.fields import file_path as file_path
from subagent_host.settings.loader import load_settings as load_settings
from subagent_host.settings.model import EXECUTORS as EXECUTORS
from subagent_host.settings.model import FILE_NAME as FILE_NAME
from subagent_host.settings.model import LOCAL as LOCAL
from subagent_host.settings.model import LOG_FORMATS as LOG_FORMATS
from subagent_host.settings.model import LOG_LEVELS as LOG_LEVELS
from subagent_host.settings.model import MAX_CONCURRENCY as MAX_CONCURRENCY
from subagent_host.settings.model import MAX_HISTORY_LIMIT as MAX_HISTORY_LIMIT
from subagent_host.settings.model import MAX_MESSAGE_BYTES as MAX_MESSAGE_BYTES
from subagent_host.settings.model import MAX_QUEUE as MAX_QUEUE
from subagent_host.settings.model import MIN_MESSAGE_BYTES as MIN_MESSAGE_BYTES
from subagent_host.settings.model import MIN_RESUME_TOKEN_TTL_MS as MIN_RESUME_TOKEN_TTL_MS
from subagent_host.settings.model import PROCESS_TRACKING as PROCESS_TRACKING
from subagent_host.settings.model import PROJECT_FILE as PROJECT_FILE
from subagent_host.settings.model import RAY as RAY
from subagent_host.settings.model import AcpBackendSetting as AcpBackendSetting
from subagent_host.settings.model import ExecutorChoice as ExecutorChoice
from subagent_host.settings.model import ModelProfile as ModelProfile
from subagent_host.settings.model import Settings as Settings
from subagent_host.settings.model import SettingsDiagnostic as SettingsDiagnostic
