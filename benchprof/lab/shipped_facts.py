"""The model facts shipped with the package (benchprof/assets/model_facts.json): the demo model's, computed here by
preflight.read_model under this environment's library versions, so that a new user's first `run --dry_run` on
the demo config reads them instead of importing transformers (issue 65's 3 s). Another model, another library
version or an edited file of the demo model is another key, checked through transformers as before."""

from __future__ import annotations

from dataclasses import asdict

from benchprof import BenchprofError
from benchprof.core.storage import write_json
from benchprof.stages.preflight import SHIPPED_FACTS, model_facts_key, read_model

SHIPPED_MODELS = ("demo-model",)  # under benchprof/assets/


def shipped_entries() -> list[dict]:
    """[{"model", "key", "facts"}] for every shipped model, read through transformers now; a model that does not
    check cleanly is refused in one line."""
    entries = []
    for name in SHIPPED_MODELS:
        folder = str(SHIPPED_FACTS.parent / name)
        problems: list[str] = []
        facts = read_model(0, folder, folder, problems)
        if facts is None or problems:
            raise BenchprofError(f"{folder}: does not check cleanly ({'; '.join(problems) or 'no config'})")
        entries.append({"model": name, "key": model_facts_key(folder, folder), "facts": asdict(facts)})
    return entries


def main() -> None:
    """Write benchprof/assets/model_facts.json for the shipped models. Run it after changing the demo model or a
    pinned version of torch, transformers or tokenizers (tests/test_reliability.py says when it is due)."""
    write_json(SHIPPED_FACTS, shipped_entries())
    print(f"{SHIPPED_FACTS}: facts of {', '.join(SHIPPED_MODELS)}")
