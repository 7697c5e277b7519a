"""A tiny Llama and its BPE tokenizer, built fully offline (no hub) for tests and the demo."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>"]

# One line per message; the model learns the roles from the special tokens.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1000) -> Any:
    """A byte-level BPE tokenizer trained on `texts`, wrapped for transformers (bos/eos/pad, chat template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=SPECIAL_TOKENS[4:],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_model(
    tokenizer: Any,
    hidden_size: int = 64,
    num_layers: int = 4,
    num_heads: int = 4,
    intermediate_size: int = 172,
    max_positions: int = 512,
    seed: int = 0,
) -> Any:
    """A randomly initialised LlamaForCausalLM sized for the tokenizer (tied embeddings)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.eval()
    return model


def make_tiny_model(
    out_dir: Path, texts: Iterable[str] | None = None, vocab_size: int = 1000, seed: int = 0, **model_kwargs: Any
) -> Path:
    """Train a tokenizer, build a random tiny Llama, save both into `out_dir` (modeling.save_model)."""
    from benchprof.core.modeling import save_model

    if texts is None:
        texts = default_corpus()
    tok = train_tokenizer(texts, vocab_size=vocab_size)
    model = build_model(tok, seed=seed, **model_kwargs)
    out_dir = Path(out_dir)
    save_model(model, tok, out_dir)
    return out_dir


def default_corpus() -> list[str]:
    """A small mixed corpus so the tokenizer covers ordinary English, digits and the prompt format."""
    lines = [
        "Context: Anna put the red ball in the box. Question: Where is the red ball? Answer: in the box",
        "Question: What is 12 plus 7? Answer: 19",
        "The capital of France is Paris. The capital of Japan is Tokyo.",
        "hot is to cold as up is to down; a wheel is part of a car.",
        "Monday comes before Tuesday. The meeting at 3:15 lasts 45 minutes and ends at 4:00.",
        "All cats are animals. Tom is a cat. Therefore Tom is an animal.",
        "2, 4, 6, 8, 10; the rule is add 2. North, south, east, west, left of, right of, above, below.",
        "You are a helpful assistant. Options: A) B) C) D)",
    ]
    words = " ".join(lines)
    return lines * 20 + [" ".join(str(i) for i in range(200)), words.lower(), words.upper()]
