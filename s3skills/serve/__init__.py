"""Front ends that serve a skills agent: LangGraph Server glue (`s3skills.serve.langgraph`)."""

__all__: list[str] = []
