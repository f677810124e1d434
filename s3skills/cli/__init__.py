"""The `s3skills` command line: manage a user's skill library in a bucket, run the demo.

    s3skills [--bucket B] [--user U] [--endpoint-url URL] [--profile P] [--region R]
             [--layout users|seeds] [--json] [--debug] COMMAND ...

`main` is the console script's entry point. The modules: `app` (the group, errors,
exit statuses), `context` (global options, `Context`), one module per family of
commands (`library`, `transfer`, `scaffold`, `demo`). Importing this package does not
import LangChain, LangGraph or deepagents: the commands that need them import them.
"""

from s3skills.cli.app import cli, main
from s3skills.cli.context import CliError, Context, Settings, UsageError

__all__ = ["CliError", "Context", "Settings", "UsageError", "cli", "main"]
