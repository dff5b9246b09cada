"""The chat template as an episode's token ids: the first prompt's, and each observation's as the delta the template
adds after the policy's turn, tokenized once (re-tokenizing earlier turns from text drifts from the sampled ids).
The delta is rendered against a placeholder user message and the policy's assistant message, so templates that
rewrite earlier turns cannot shift it; where the template ends a turn with the end-of-sequence token, the delta
starts after the token the policy sampled, or adds it when the policy was cut off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from azr.rollouts.episodes import Message

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

PLACEHOLDER: Message = {"role": "user", "content": "."}


class ChatTokens:
    """A tokenizer's chat template (with the recipe's `template_kwargs`) as the ids of episodes."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, template_kwargs: dict | None = None):
        self.tokenizer, self.template_kwargs = tokenizer, dict(template_kwargs or {})

    def render(self, messages: list[Message], tools: list[dict] | None = None, generation: bool = True) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=generation, **self.template_kwargs
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: list[Message], tools: list[dict] | None = None) -> list[int]:
        """The first prompt's ids, ready for the policy's first turn (the generation prompt added)."""
        return self.encode(self.render(messages, tools))

    def observation(
        self, assistant: Message, observation: list[Message], ended: bool, tools: list[dict] | None = None
    ) -> tuple[list[int], str]:
        """The ids (and their text) that follow the policy's turn `assistant` when the environment answers with
        `observation`, up to the next generation prompt. `ended`: the policy's ids end with the end-of-sequence
        token (else it was cut off, and the delta closes its turn first). ValueError when the template does not
        render the conversation as a prefix of itself with the observation (a template that cannot be continued)."""
        before = self.render([PLACEHOLDER, assistant], tools, generation=False)
        after = self.render([PLACEHOLDER, assistant, *observation], tools, generation=True)
        if not after.startswith(before):
            raise ValueError("the chat template does not render the conversation as a prefix of its continuation")
        delta = after[len(before) :]
        eos = self.tokenizer.eos_token
        cut = before.rfind(eos) if eos else -1
        if cut >= 0 and not before[cut + len(eos) :].strip():
            # The template closes the assistant turn with eos (plus whitespace): what it renders after the token
            # belongs to the observation's ids; the token itself is the policy's when it sampled it.
            tail = before[cut + len(eos) :]
            delta = (tail if ended else eos + tail) + delta
        return self.encode(delta), delta
