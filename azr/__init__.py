"""azr: GRPO fine-tuning of code LLMs with rewards from sandboxed unit tests."""

__version__ = "0.5.0"
