"""`s3skills demo`: a new user's first command, a real agent run over a real S3 API.

With no options it starts an embedded S3 (moto on a loopback port; the `demo` extra),
pushes the bundled Spanish example library for the user `ana`, and runs a real
deepagents loop built by `create_skills_agent` with a scripted model whose steps read
the tool results, so the run walks the progressive-disclosure flow with no model
provider. It prints what the model saw, each tool call, and the S3 requests each step
cost. The command line is `s3skills demo` (`s3skills.cli.demo`); this package is the
library behind it:

- `script`: the scripted model's steps and the task;
- `run`: `run_demo`, the embedded S3, the agent run and its record;
- `render`: the transcript, or its one-line summary;
- `result`: `DemoResult`, `StepRecord`, `DemoError`.

Importing it imports LangChain and deepagents.
"""

from s3skills.demo.render import render, summary
from s3skills.demo.result import DemoError, DemoResult, StepRecord
from s3skills.demo.run import DEMO_BUCKET, DEMO_USER, MOTO_MISSING, PromptRecorder, embedded_s3, load_model, run_demo
from s3skills.demo.script import demo_steps

__all__ = [
    "DEMO_BUCKET",
    "DEMO_USER",
    "MOTO_MISSING",
    "DemoError",
    "DemoResult",
    "PromptRecorder",
    "StepRecord",
    "demo_steps",
    "embedded_s3",
    "load_model",
    "render",
    "run_demo",
    "summary",
]
