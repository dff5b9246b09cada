"""azr: GRPO fine-tuning of code LLMs with rewards from sandboxed unit tests."""

from azr.config import load_config

__version__ = "0.5.0"
__all__ = ["__version__", "load_config"]
